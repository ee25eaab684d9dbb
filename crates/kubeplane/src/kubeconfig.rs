//! kubeconfig files: one cluster, one user, one context, as kubectl and
//! the components read them.

use std::path::{Path, PathBuf};

/// How a kubeconfig's user proves who it is.
pub enum Credentials<'a> {
    /// A client certificate and its key.
    Cert { cert: &'a Path, key: &'a Path },
    /// A bearer token read from a file (a service account's projected token).
    TokenFile(&'a Path),
}

/// The text of a kubeconfig for `user` on the API server at `server`,
/// trusting `ca`.
pub fn render(server: &str, ca: &Path, user: &str, creds: &Credentials<'_>) -> String {
    let auth = match creds {
        Credentials::Cert { cert, key } => format!(
            "    client-certificate: {}\n    client-key: {}\n",
            cert.display(),
            key.display()
        ),
        Credentials::TokenFile(path) => format!("    tokenFile: {}\n", path.display()),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: {user}\n  user:\n{auth}contexts:\n- name: lab\n  context:\n    cluster: lab\n    user: {user}\ncurrent-context: lab\n",
        ca.display()
    )
}

/// Writes [`render`]'s text to `path`, readable by its owner only.
pub fn write(
    path: &Path,
    server: &str,
    ca: &Path,
    user: &str,
    creds: &Credentials<'_>,
) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, render(server, ca, user, creds))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(path.to_owned())
}
