//! VNF packages as CSAR `.zip` files: the bytes go to [`csar::unpack`] under the limits intake
//! applies ([`files::LIMITS`]), then, as intake's snapshot does, to the manifest check and the
//! digest; a package that unpacks is written to a scratch directory and loaded by
//! [`VnfPackage::load`] (TOSCA.meta, the VNFD and its imports) and its flavour's BaseHOT read by
//! [`VnfPackage::base_hot`] — the functions the engine calls on a package snapshot.
//!
//! Properties: every unpacked path passes [`files::check_path`]; the file count, each file's size
//! and their sum are within the limits; the digest does not depend on anything but the files
//! (unpacking again gives the same). Memory: the limits bound what an archive may inflate to
//! (ratio 200, 64 MiB per file, 256 MiB in all); this target writes out only packages of at most
//! 8 MiB.

use vnfkeeper_core::package::{VnfPackage, csar, files};

/// Packages larger than this (inflated) are checked but not written out and loaded.
const MAX_WRITTEN: u64 = 8 << 20;

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let limits = &files::LIMITS;
    let Ok(pkg) = csar::unpack(data, limits) else {
        return;
    };
    assert!(pkg.len() <= limits.max_files, "more files than the limit");
    let mut total = 0u64;
    for (path, content) in pkg.iter() {
        files::check_path(path).expect("an unpacked path breaks the path rules");
        let len = content.len() as u64;
        assert!(
            len <= limits.max_file_bytes,
            "{path}: over the per-file limit"
        );
        total += len;
    }
    assert!(total <= limits.max_total_bytes, "over the total limit");
    let again = csar::unpack(data, limits).expect("unpacks once, fails the second time");
    assert_eq!(
        again.digest(),
        pkg.digest(),
        "the digest is not deterministic"
    );
    let _ = pkg.manifest_path();
    let _ = pkg.verify_manifest();
    if total > MAX_WRITTEN {
        return;
    }
    let dir = crate::scratch("package");
    let _ = std::fs::remove_dir_all(&dir);
    for (path, content) in pkg.iter() {
        let p = dir.join(path);
        // A file and a directory of the same name (`a` and `a/b`) cannot both be written: such a
        // package fails to load, as its snapshot would fail to be written.
        let written = p
            .parent()
            .is_none_or(|parent| std::fs::create_dir_all(parent).is_ok())
            && std::fs::write(&p, content).is_ok();
        if !written {
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    }
    if let Ok(loaded) = VnfPackage::load(&dir) {
        let flavour = loaded.vnfd.flavour_id.clone();
        let _ = loaded.base_hot(&flavour);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
