//! Attaching tc programs to devices so they outlive the agent.
//!
//! tcx links are pinned in bpffs: a killed agent leaves every program in
//! place, and a restarted one swaps in its freshly loaded program with one
//! atomic link update, so no packet meets a device without a program. On
//! kernels without tcx the legacy clsact qdisc and a direct-action filter
//! are used; those persist on their own.

use crate::{AttachError, Error};
use aya::programs::links::{FdLink, Link as _, PinnedLink};
use aya::programs::tc::{self, NlOptions, SchedClassifierLink, TcAttachOptions, TcHandle};
use aya::programs::{LinkOrder, SchedClassifier, TcAttachType};
use std::path::Path;

/// Which kernel mechanism holds an attachment (`cilium status` "Attach Mode").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    Tcx,
    Tc,
}

impl AttachMode {
    /// The name Cilium's API gives it (`attach-mode` in the status).
    pub fn as_str(self) -> &'static str {
        match self {
            AttachMode::Tcx => "tcx",
            AttachMode::Tc => "tc",
        }
    }
}

/// Where on a device a program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    Ingress,
    Egress,
}

impl Hook {
    fn tc(self) -> TcAttachType {
        match self {
            Hook::Ingress => TcAttachType::Ingress,
            Hook::Egress => TcAttachType::Egress,
        }
    }
}

/// Attaches `prog` (named `symbol`) at `hook` of `ifname`, reusing the link
/// pinned at `links_dir/<symbol>` when there is a live one.
pub fn attach_pinned(
    prog: &mut SchedClassifier,
    symbol: &str,
    ifname: &str,
    hook: Hook,
    links_dir: &Path,
    mode: AttachMode,
) -> Result<AttachMode, Error> {
    let pin = links_dir.join(symbol);
    let fail = |cause: AttachError| Error::Attach {
        program: symbol.to_owned(),
        device: ifname.to_owned(),
        cause: Box::new(cause),
    };
    let tc_fallback = |prog: &mut SchedClassifier| {
        attach_tc(prog, ifname, hook)
            .map(|()| AttachMode::Tc)
            .map_err(|e| fail(AttachError::Tc(Box::new(e))))
    };
    if mode == AttachMode::Tc {
        // A tcx link left from a run with tcx enabled would shadow tc.
        remove_links(links_dir);
        return tc_fallback(prog);
    }
    if replace_pinned(prog, &pin) {
        return Ok(AttachMode::Tcx);
    }
    let _ = std::fs::remove_file(&pin);
    let id = match prog.attach_with_options(
        ifname,
        hook.tc(),
        TcAttachOptions::TcxOrder(LinkOrder::default()),
    ) {
        Ok(id) => id,
        Err(e) => {
            tracing::debug!(subsys = "datapath", device = ifname, error = %e, "tcx attach failed, falling back to tc");
            return tc_fallback(prog);
        }
    };
    std::fs::create_dir_all(links_dir).map_err(|e| Error::io("creating", links_dir, e))?;
    let link: FdLink = prog
        .take_link(id)
        .map_err(|e| fail(e.into()))?
        .try_into()
        .map_err(|e: aya::programs::links::LinkError| fail(e.into()))?;
    link.pin(&pin).map_err(|source| {
        fail(AttachError::Pin {
            path: pin.clone(),
            source,
        })
    })?;
    Ok(AttachMode::Tcx)
}

/// Cilium's tc filter: priority 1, handle 1.
const TC_PRIORITY: u16 = 1;
const TC_HANDLE: TcHandle = TcHandle::new(0, 1);

/// A direct-action filter at Cilium's priority and handle, replacing the
/// program of an existing one in place so the device is never uncovered.
/// The clsact qdisc is added only when the first try finds none: a pod's
/// veth has it from cilium-cni, and asking again costs the endpoint's
/// creation an RTNL round trip.
fn attach_tc(prog: &mut SchedClassifier, ifname: &str, hook: Hook) -> Result<(), AttachError> {
    let attach = |prog: &mut SchedClassifier| {
        let options = NlOptions {
            priority: TC_PRIORITY,
            handle: TC_HANDLE,
            classid: None,
        };
        prog.attach_with_options(ifname, hook.tc(), TcAttachOptions::Netlink(options))
    };
    let id = match attach(prog) {
        Ok(id) => id,
        Err(_) => {
            if let Err(e) = tc::qdisc_add_clsact(ifname) {
                if !matches!(&e, tc::TcError::AlreadyAttached) {
                    tracing::debug!(subsys = "datapath", device = ifname, error = %e, "clsact qdisc");
                }
            }
            match attach(prog) {
                Ok(id) => id,
                Err(create_err) => {
                    let existing = SchedClassifierLink::attached(
                        ifname,
                        hook.tc(),
                        TC_PRIORITY,
                        TC_HANDLE,
                        None,
                    )
                    .map_err(AttachError::TcLookup)?;
                    prog.attach_to_link(existing)
                        .map_err(|replace| AttachError::TcReplace {
                            create: Box::new(create_err),
                            replace: Box::new(replace),
                        })?
                }
            }
        }
    };
    // The filter stays in the kernel when the handle is forgotten.
    std::mem::forget(prog.take_link(id)?);
    Ok(())
}

/// Removes the priority-1, handle-1 filter `attach_tc` made; a missing one
/// is fine.
pub fn detach_tc(ifname: &str, hook: Hook) {
    if let Ok(link) = SchedClassifierLink::attached(ifname, hook.tc(), TC_PRIORITY, TC_HANDLE, None)
    {
        if let Err(e) = link.detach() {
            tracing::debug!(subsys = "datapath", device = ifname, error = %e, "no tc filter to remove");
        }
    }
}

/// Swaps `prog` into a live pinned link; false when there is none to reuse.
fn replace_pinned(prog: &mut SchedClassifier, pin: &Path) -> bool {
    let Ok(pinned) = PinnedLink::from_pin(pin) else {
        return false;
    };
    let link: Result<SchedClassifierLink, _> = FdLink::from(pinned).try_into();
    let Ok(link) = link else {
        return false;
    };
    match prog.attach_to_link(link) {
        Ok(id) => {
            // The pin keeps the link; our handle may go.
            if let Ok(link) = prog.take_link(id) {
                std::mem::forget(link);
            }
            true
        }
        Err(e) => {
            tracing::debug!(subsys = "datapath", pin = %pin.display(), error = %e, "pinned link is stale");
            false
        }
    }
}

/// Removes the pinned links of a device or endpoint; with tcx that detaches
/// the programs if the device still exists.
pub fn remove_links(links_dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(links_dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(subsys = "datapath", dir = %links_dir.display(), error = %e, "Unable to remove pinned links");
        }
    }
}
