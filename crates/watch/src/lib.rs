//! The watch layer: one way for the agent's subsystems to follow desired
//! state, whatever its source.
//!
//! A [`Source`] (the kvstore's list-and-watch of a prefix today, a
//! Kubernetes reflector next) yields [`Event`]s: upserts and deletes of
//! keys, the end of a listing, and the start of a new one. A [`Store`]
//! keeps what the source says each key should be and what its [`Handler`]
//! last accepted, and hands the handler the difference as a [`Change`]:
//! an upsert with the old and new value, a delete with the old value, and
//! once, when the initial listing has been handled, `Synced`.
//!
//! The store, not each subscriber, settles the hard cases:
//! - a relist (after a watch broke, or the first listing against state
//!   the subscriber restored) deletes the keys the listing no longer has;
//! - a handler that fails is retried with backoff, with the latest value
//!   of the key, while other keys go on;
//! - [`Synced`] tells anyone who waits that the initial listing is in.

mod mirror;
mod source;
mod store;

pub use mirror::Mirror;
pub use source::{Decoded, Event, Source, Tapped};
pub use store::{Backoff, Change, Handler, Store, Synced};
