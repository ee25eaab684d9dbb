//! The files of the agent's state directory that Cilium's own tools read
//! (`cilium-dbg bpf sha list|get`): the datapath template and, per
//! endpoint, the name of the template it runs. The agent writes them; the
//! CLI reads them; both spell the layout here.

/// Where Cilium 1.16 keeps it (`cilium-dbg` hard-codes this path).
pub const DEFAULT: &str = "/var/run/cilium/state";
/// `<state>/templates/<sha>/`: one directory per datapath template.
pub const TEMPLATES_DIR: &str = "templates";
/// The template's configuration header, inside its directory.
pub const TEMPLATE_HEADER: &str = "ep_config.h";
/// `<state>/<endpoint ID>/template.txt`: the template the endpoint runs.
pub const ENDPOINT_TEMPLATE: &str = "template.txt";
