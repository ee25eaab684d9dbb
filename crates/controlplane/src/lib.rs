//! The agent's control plane: everything that decides what the datapath
//! should hold (endpoints, identities, the ipcache, IPAM, nodes, services,
//! policy), built from narrow handles and reaching the kernel only through
//! the traits of [`ports`]. It does not depend on the `datapath` or
//! `netdev` crates, so nothing here can touch the kernel behind a port's
//! back, and all of it can be tested as a normal user.

pub mod controller;
pub mod endpoint;
pub mod events;
pub mod identity;
pub mod ipam;
pub mod ipcache;
pub mod ipsync;
pub mod kvwriter;
pub mod labels;
pub mod map_events;
pub mod node;
pub mod node_ids;
pub mod nodes;
pub mod plane;
pub mod policies;
pub mod ports;
pub mod regeneration;
pub mod remote_nodes;
pub mod services;
pub mod statefile;
pub mod tasks;

pub use events::AgentNotify;
pub use plane::{ControlPlane, Ports, Settings, StartError};
pub use ports::{Events, KernelError};
