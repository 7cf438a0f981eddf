//! CSAR `.zip` packages (ETSI GS NFV-SOL 004 §4.1: a ZIP archive with `TOSCA-Metadata/TOSCA.meta`
//! naming the `Entry-Definitions`) unpacked in memory into [`PackageFiles`], by the `zip` crate.
//! Pure: the caller reads the archive's bytes (bounded) and writes the files out.
//!
//! Refused, with a reason naming the entry: an absolute name, a `..`, `.` or empty component, a
//! backslash or control character ([`super::files::check_path`]); a symbolic link entry; an
//! encrypted entry; more entries than [`Limits::max_files`]; an entry over
//! [`Limits::max_file_bytes`] or a sum over [`Limits::max_total_bytes`] (declared *and* actually
//! inflated: reads stop one byte past the limit); an entry whose uncompressed size is more than
//! [`Limits::max_ratio`] times its compressed size; the same name twice.

use std::io::{Cursor, Read};

use super::files::{FilesError, Limits, PackageFiles, check_path};

/// Unpacks the CSAR `bytes` under `limits`. Directory entries are skipped (a directory exists
/// through its files). Errors: [`FilesError`] naming the entry and the rule.
pub fn unpack(bytes: &[u8], limits: &Limits) -> Result<PackageFiles, FilesError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| FilesError(format!("not a readable ZIP archive: {e}")))?;
    if zip.len() > limits.max_files {
        return Err(FilesError(format!(
            "the archive has {} entries; the limit is {}",
            zip.len(),
            limits.max_files
        )));
    }
    let mut files = PackageFiles::new();
    let mut declared_total: u64 = 0;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| FilesError(format!("entry {i} cannot be read: {e}")))?;
        let name = entry
            .name()
            .map_err(|e| FilesError(format!("entry {i} has an unreadable name: {e}")))?
            .into_owned();
        if entry.is_symlink() {
            return Err(FilesError(format!(
                "entry {name:?} is a symbolic link; a package holds regular files only"
            )));
        }
        if entry.encrypted() {
            return Err(FilesError(format!("entry {name:?} is encrypted")));
        }
        let is_dir = entry.is_dir();
        let path = if is_dir {
            name.trim_end_matches('/')
        } else {
            name.as_str()
        };
        check_path(path).map_err(|e| FilesError(format!("entry {e}")))?;
        if is_dir {
            continue;
        }
        let size = entry.size();
        if size > limits.max_file_bytes {
            return Err(FilesError(format!(
                "entry {name:?} inflates to {size} bytes; the per-file limit is {}",
                limits.max_file_bytes
            )));
        }
        declared_total = declared_total.saturating_add(size);
        if declared_total > limits.max_total_bytes {
            return Err(FilesError(format!(
                "the archive inflates to more than {} bytes in total (the limit)",
                limits.max_total_bytes
            )));
        }
        if size
            > entry
                .compressed_size()
                .max(1)
                .saturating_mul(limits.max_ratio)
        {
            return Err(FilesError(format!(
                "entry {name:?} inflates {size} bytes from {} (ratio over {}: a zip bomb?)",
                entry.compressed_size(),
                limits.max_ratio
            )));
        }
        // The declared size may lie: read at most one byte past the limit.
        let mut content = Vec::with_capacity(size as usize);
        (&mut entry)
            .take(limits.max_file_bytes + 1)
            .read_to_end(&mut content)
            .map_err(|e| FilesError(format!("entry {name:?} cannot be inflated: {e}")))?;
        if content.len() as u64 != size {
            return Err(FilesError(format!(
                "entry {name:?} inflates to another size than it declares"
            )));
        }
        files.insert(path, content, limits)?;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use zip::write::SimpleFileOptions;

    use super::super::files::LIMITS;
    use super::*;

    fn zip_of(build: impl FnOnce(&mut zip::ZipWriter<Cursor<Vec<u8>>>)) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        build(&mut w);
        w.finish().unwrap().into_inner()
    }

    fn opts() -> SimpleFileOptions {
        SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated)
    }

    #[test]
    fn a_plain_archive_unpacks_with_its_directories_skipped() {
        let z = zip_of(|w| {
            w.add_directory("TOSCA-Metadata/", opts()).unwrap();
            w.start_file("TOSCA-Metadata/TOSCA.meta", opts()).unwrap();
            w.write_all(b"Entry-Definitions: Definitions/v.yaml\n")
                .unwrap();
            w.start_file("Definitions/v.yaml", opts()).unwrap();
            w.write_all(b"tosca_definitions_version: x\n").unwrap();
        });
        let f = unpack(&z, &LIMITS).unwrap();
        assert_eq!(
            f.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            ["Definitions/v.yaml", "TOSCA-Metadata/TOSCA.meta"]
        );
    }

    #[test]
    fn hostile_archives_are_refused_with_the_entry_named() {
        let escape = zip_of(|w| {
            w.start_file("../../etc/cron.d/x", opts()).unwrap();
            w.write_all(b"x").unwrap();
        });
        let e = unpack(&escape, &LIMITS).unwrap_err();
        assert!(
            e.0.contains("../../etc/cron.d/x") && e.0.contains(".."),
            "{e}"
        );

        let absolute = zip_of(|w| {
            w.start_file("/etc/passwd", opts()).unwrap();
            w.write_all(b"x").unwrap();
        });
        assert!(
            unpack(&absolute, &LIMITS)
                .unwrap_err()
                .0
                .contains("absolute")
        );

        let link = zip_of(|w| {
            w.add_symlink("Scripts/install.sh", "/etc/shadow", opts())
                .unwrap();
        });
        assert!(
            unpack(&link, &LIMITS)
                .unwrap_err()
                .0
                .contains("symbolic link")
        );

        // 8 MiB of zeros deflate to a few KiB: over the ratio.
        let bomb = zip_of(|w| {
            w.start_file("Files/zeros", opts()).unwrap();
            w.write_all(&vec![0u8; 8 << 20]).unwrap();
        });
        let e = unpack(&bomb, &LIMITS).unwrap_err();
        assert!(e.0.contains("zip bomb"), "{e}");
        // And over a per-file limit even with any ratio allowed.
        let lax = Limits {
            max_ratio: u64::MAX,
            max_file_bytes: 1 << 20,
            ..LIMITS
        };
        assert!(
            unpack(&bomb, &lax)
                .unwrap_err()
                .0
                .contains("per-file limit")
        );

        let many = zip_of(|w| {
            for i in 0..5 {
                w.start_file(format!("f{i}"), opts()).unwrap();
            }
        });
        let few = Limits {
            max_files: 4,
            ..LIMITS
        };
        assert!(unpack(&many, &few).unwrap_err().0.contains("5 entries"));

        assert!(unpack(b"not a zip", &LIMITS).unwrap_err().0.contains("ZIP"));
    }
}
