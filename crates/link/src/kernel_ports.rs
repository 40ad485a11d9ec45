//! Which of a port's own traffic a link's receive filter sends to the
//! kernel rather than to ustack: the `[kni]` exception path's rule, for
//! links that can apply it before ustack sees a frame (AF_XDP's
//! classifying program, `Link::serve_kernel_ports`).

/// `[kni] method` and `kni_action` as a receive filter applies them to
/// TCP and UDP destination ports of frames for the port's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelPorts {
    /// None: no exception path (or `kni_action=alltoff`).
    None,
    /// The listed ports (`method=accept`).
    Listed,
    /// All but the listed ports, other protocols too (`method=reject`).
    Unlisted,
    /// Everything (`kni_action=alltokni`); ARP and neighbour discovery
    /// stay ustack's.
    All,
}
