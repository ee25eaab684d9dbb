//! The OCI image documents (config, manifest, index) for a one-layer
//! image, serialized the same way every time.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::layer::Layer;
use crate::Error;

pub const MEDIA_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const MEDIA_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
/// The annotation containerd's import names the image by.
pub const ANNOTATION_CONTAINERD_NAME: &str = "io.containerd.image.name";
pub const ANNOTATION_REF_NAME: &str = "org.opencontainers.image.ref.name";
pub const OCI_LAYOUT: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;

/// A sha256 content digest.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    pub fn of(bytes: &[u8]) -> Self {
        Digest(Sha256::digest(bytes).into())
    }

    /// The lowercase hex, as in blobs/sha256/<hex>.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// How a container of the image runs (the config's `config` object).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: String,
    /// "uid:gid", or empty for root.
    pub user: String,
    /// "80/tcp" and the like.
    pub exposed_ports: Vec<String>,
}

/// A one-layer image and the name containerd will know it by.
#[derive(Debug, Clone)]
pub struct Image {
    /// The full reference, e.g. "registry.k8s.io/pause:3.10.1".
    pub reference: String,
    pub config: RunConfig,
    pub layer: Layer,
}

/// The JSON documents of an image whose layer has been hashed.
pub struct Documents {
    pub config: Vec<u8>,
    pub manifest: Vec<u8>,
    pub index: Vec<u8>,
    pub manifest_digest: Digest,
}

impl Image {
    /// The tag part of the reference ("3.10.1").
    pub fn tag(&self) -> Result<&str, Error> {
        let bad = |reason| Error::BadReference {
            reference: self.reference.clone(),
            reason,
        };
        let last = self.reference.rsplit('/').next().unwrap_or_default();
        match last.split_once(':') {
            Some((name, tag)) if !name.is_empty() && !tag.is_empty() => Ok(tag),
            _ => Err(bad("has no tag")),
        }
    }

    /// The config, manifest and index for a layer tar with this digest
    /// and size.
    pub fn documents(&self, layer: Digest, layer_size: u64) -> Result<Documents, Error> {
        let c = &self.config;
        let config = to_json(&ConfigDoc {
            architecture: "amd64",
            os: "linux",
            config: RunDoc {
                user: &c.user,
                exposed_ports: c
                    .exposed_ports
                    .iter()
                    .map(|p| (p.as_str(), Empty {}))
                    .collect(),
                env: &c.env,
                entrypoint: &c.entrypoint,
                cmd: &c.cmd,
                working_dir: &c.working_dir,
            },
            rootfs: RootFs {
                kind: "layers",
                diff_ids: vec![layer.to_string()],
            },
        });
        let manifest = to_json(&ManifestDoc {
            schema_version: 2,
            media_type: MEDIA_MANIFEST,
            config: Descriptor::new(MEDIA_CONFIG, &config),
            layers: vec![Descriptor {
                media_type: MEDIA_LAYER,
                digest: layer.to_string(),
                size: layer_size,
                annotations: BTreeMap::new(),
            }],
        });
        let mut manifest_desc = Descriptor::new(MEDIA_MANIFEST, &manifest);
        manifest_desc
            .annotations
            .insert(ANNOTATION_CONTAINERD_NAME, self.reference.clone());
        manifest_desc
            .annotations
            .insert(ANNOTATION_REF_NAME, self.tag()?.to_owned());
        let index = to_json(&IndexDoc {
            schema_version: 2,
            media_type: MEDIA_INDEX,
            manifests: vec![manifest_desc],
        });
        Ok(Documents {
            manifest_digest: Digest::of(&manifest),
            config,
            manifest,
            index,
        })
    }
}

fn to_json(value: &impl Serialize) -> Vec<u8> {
    // Serializing these plain structs of strings and numbers cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

#[derive(Serialize)]
struct ConfigDoc<'a> {
    architecture: &'static str,
    os: &'static str,
    config: RunDoc<'a>,
    rootfs: RootFs,
}

#[derive(Serialize)]
struct RunDoc<'a> {
    #[serde(rename = "User", skip_serializing_if = "str::is_empty")]
    user: &'a str,
    #[serde(rename = "ExposedPorts", skip_serializing_if = "BTreeMap::is_empty")]
    exposed_ports: BTreeMap<&'a str, Empty>,
    #[serde(rename = "Env", skip_serializing_if = "<[String]>::is_empty")]
    env: &'a [String],
    #[serde(rename = "Entrypoint", skip_serializing_if = "<[String]>::is_empty")]
    entrypoint: &'a [String],
    #[serde(rename = "Cmd", skip_serializing_if = "<[String]>::is_empty")]
    cmd: &'a [String],
    #[serde(rename = "WorkingDir", skip_serializing_if = "str::is_empty")]
    working_dir: &'a str,
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct RootFs {
    #[serde(rename = "type")]
    kind: &'static str,
    diff_ids: Vec<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestDoc {
    schema_version: u32,
    media_type: &'static str,
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IndexDoc {
    schema_version: u32,
    media_type: &'static str,
    manifests: Vec<Descriptor>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: &'static str,
    digest: String,
    size: u64,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: BTreeMap<&'static str, String>,
}

impl Descriptor {
    fn new(media_type: &'static str, blob: &[u8]) -> Self {
        Descriptor {
            media_type,
            digest: Digest::of(blob).to_string(),
            size: blob.len() as u64,
            annotations: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(reference: &str) -> Image {
        Image {
            reference: reference.into(),
            config: RunConfig {
                cmd: vec!["sh".into()],
                ..RunConfig::default()
            },
            layer: Layer::new(),
        }
    }

    #[test]
    fn the_tag_is_after_the_last_colon_of_the_last_path_part() {
        assert_eq!(
            image("registry.k8s.io/pause:3.10.1").tag().unwrap(),
            "3.10.1"
        );
        assert_eq!(image("localhost:5000/x/y:v1").tag().unwrap(), "v1");
        assert!(image("localhost:5000/x/y").tag().is_err());
    }

    #[test]
    fn the_index_names_the_image_and_the_manifest() {
        let layer = Digest::of(b"layer");
        let docs = image("registry.k8s.io/pause:3.10.1")
            .documents(layer, 5)
            .unwrap();
        let index: serde_json::Value = serde_json::from_slice(&docs.index).unwrap();
        let m = &index["manifests"][0];
        assert_eq!(
            m["annotations"][ANNOTATION_CONTAINERD_NAME],
            "registry.k8s.io/pause:3.10.1"
        );
        assert_eq!(m["annotations"][ANNOTATION_REF_NAME], "3.10.1");
        assert_eq!(m["digest"], docs.manifest_digest.to_string());
        let config: serde_json::Value = serde_json::from_slice(&docs.config).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][0], layer.to_string());
        assert_eq!(config["config"]["Cmd"][0], "sh");
        assert!(config.get("created").is_none());
    }
}
