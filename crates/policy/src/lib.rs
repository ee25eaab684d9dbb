//! Network policy, pure: labels and selectors, CiliumNetworkPolicy /
//! CiliumClusterwideNetworkPolicy / NetworkPolicy parsed from YAML, and the
//! per-endpoint policy-map state they resolve to, with Cilium's precedence.

pub mod labels;
mod manifest;
pub mod mapstate;
pub mod parse;
pub mod resolve;
pub mod rule;
pub mod selector;
mod text_tree;

pub use labels::{Label, Labels};
pub use mapstate::{Key, MapState, Verdict};
pub use parse::{parse, parse_documents, Document, ParseError};
pub use resolve::{resolve, selectors, EndpointPolicy, Enforcement, Identity, SelectorUse};
pub use rule::{Cidr, CidrError, Entity, Peer, PeerRule, PortProtocol, Protocol, Rule};
pub use selector::{Operator, Requirement, Selector};
