//! The per-run store data, composed of each unit's state: see
//! [`super::bindings`], where [`HostState`] is declared with the units.

pub use super::bindings::HostState;
