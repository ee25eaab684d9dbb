//! Builds the lab's image archives by hand:
//!   cargo run -p images --example build_images -- OUT_DIR [RELEASE_DIR] [PAUSE] [AGNHOST]
//! RELEASE_DIR defaults to target/release; PAUSE and AGNHOST may be "-".

use std::path::PathBuf;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(out) = args.first() else {
        return Err("usage: build_images OUT_DIR [RELEASE_DIR] [PAUSE|-] [AGNHOST|-]".into());
    };
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let optional = |i: usize| args.get(i).filter(|a| *a != "-").map(PathBuf::from);
    let mut inputs = images::Inputs::for_workspace(&workspace, optional(2), optional(3));
    if let Some(release) = optional(1) {
        inputs.release_dir = release;
    }
    let start = Instant::now();
    for b in images::build_all(&inputs, &PathBuf::from(out))? {
        println!(
            "{} {} {} bytes={} rebuilt={}",
            b.reference,
            b.path.display(),
            b.manifest_digest,
            b.size,
            b.rebuilt
        );
    }
    println!("took {:?}", start.elapsed());
    Ok(())
}
