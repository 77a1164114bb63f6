//! The scheduler driven without sockets.
