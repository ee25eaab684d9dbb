//! The resolved configuration under `--dest`, as kubelet projects a
//! ConfigMap: one file per key in a fresh `..data_<time>` directory, the
//! `..data` symlink swung to it in one rename, `<key>` -> `..data/<key>`.

use super::objects::Pairs;
use anyhow::Context;
use std::path::Path;

/// Publishes `config` under `dest` as kubelet projects a ConfigMap.
pub fn publish(dest: &Path, config: &Pairs) -> anyhow::Result<()> {
    use std::os::unix::fs::symlink;
    std::fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let data_name = format!("..data_{stamp}");
    let data = dest.join(&data_name);
    std::fs::create_dir(&data).with_context(|| format!("creating {}", data.display()))?;
    let written = config.iter().try_for_each(|(k, v)| {
        std::fs::write(data.join(k), v)
            .with_context(|| format!("writing {}", data.join(k).display()))
    });
    if let Err(e) = written {
        // the old ..data stays what the agent reads
        let _ = std::fs::remove_dir_all(&data);
        return Err(e);
    }
    let old = std::fs::read_link(dest.join("..data")).ok();
    let tmp = dest.join("..data.tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(&data_name, &tmp).context("linking ..data.tmp")?;
    std::fs::rename(&tmp, dest.join("..data")).context("swinging ..data")?;
    for entry in std::fs::read_dir(dest)?.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && !config.contains_key(&name) {
            std::fs::remove_file(entry.path())
                .with_context(|| format!("removing the stale key {name}"))?;
        }
    }
    for k in config.keys() {
        let link = dest.join(k);
        if std::fs::read_link(&link).is_err() {
            let _ = std::fs::remove_file(&link);
            symlink(Path::new("..data").join(k), &link).with_context(|| format!("linking {k}"))?;
        }
    }
    if let Some(old) = old.filter(|o| o != Path::new(&data_name)) {
        let _ = std::fs::remove_dir_all(dest.join(old));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishing_swings_the_data_link_and_drops_stale_keys() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("config-map");
        let mut c = Pairs::from([
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ]);
        publish(&dest, &c).unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("a")).unwrap(), "1");
        c.remove("b");
        c.insert("a".into(), "3".into());
        publish(&dest, &c).unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("a")).unwrap(), "3");
        assert!(!dest.join("b").exists());
        let data_dirs = std::fs::read_dir(&dest)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("..data_"))
            .count();
        assert_eq!(data_dirs, 1);
    }
}
