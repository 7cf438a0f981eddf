//! A VNF package as a set of files in memory: what intake reads from the operator's package
//! (a directory or a CSAR `.zip`), checks against its manifest, names by digest and copies into
//! the package store. No I/O here: the shell reads and writes, this module decides.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256, Sha512};

use crate::digest::hex;

/// Size limits on a package read at intake. A package over any of them is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most files (and, for a `.zip`, most entries of any kind).
    pub max_files: usize,
    /// Largest file, bytes (uncompressed).
    pub max_file_bytes: u64,
    /// Largest sum of all files, bytes (uncompressed).
    pub max_total_bytes: u64,
    /// Largest ratio uncompressed / compressed size of one `.zip` entry (a zip bomb's tell).
    pub max_ratio: u64,
}

/// The limits intake applies: 4,096 files, 64 MiB per file, 256 MiB in total, ratio 200.
/// The fixture packages are about 40 files and 100 KiB; a package with a VM image inside is not
/// accepted (images are referenced by `vimConnectionInfo`/Glance, not copied through intake).
pub const LIMITS: Limits = Limits {
    max_files: 4096,
    max_file_bytes: 64 << 20,
    max_total_bytes: 256 << 20,
    max_ratio: 200,
};

/// A package file set over a limit or with a bad name: the reason, naming the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FilesError(pub String);

/// The files of a package by package-relative path (`Definitions/vnfd.yaml`: `/`-separated, no
/// empty, `.` or `..` component, not absolute), with their contents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageFiles {
    files: BTreeMap<String, Vec<u8>>,
    total: u64,
}

impl PackageFiles {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `content` at `path`, enforcing `limits` (count, per-file and total size) and the
    /// path rules ([`check_path`]). Errors: a reason naming the file.
    pub fn insert(
        &mut self,
        path: &str,
        content: Vec<u8>,
        limits: &Limits,
    ) -> Result<(), FilesError> {
        check_path(path)?;
        if self.files.contains_key(path) {
            return Err(FilesError(format!("`{path}` appears twice")));
        }
        if self.files.len() >= limits.max_files {
            return Err(FilesError(format!(
                "more than {} files (the limit)",
                limits.max_files
            )));
        }
        let len = content.len() as u64;
        if len > limits.max_file_bytes {
            return Err(FilesError(format!(
                "`{path}` is larger than {} bytes (the per-file limit)",
                limits.max_file_bytes
            )));
        }
        let total = self.total + len;
        if total > limits.max_total_bytes {
            return Err(FilesError(format!(
                "the package is larger than {} bytes in total (the limit)",
                limits.max_total_bytes
            )));
        }
        self.total = total;
        self.files.insert(path.to_owned(), content);
        Ok(())
    }

    /// The content of `path`, if the package has that file.
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }

    /// Every file, by path in byte order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files.iter().map(|(p, c)| (p.as_str(), c.as_slice()))
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The digest naming this file set: SHA-256 of its file list in the `sha256sum` format,
    /// one line `<hex SHA-256 of the content>  <path>\n` per file in path byte order. Two
    /// packages with the same files and contents have the same digest, wherever they came from
    /// (directory or `.zip`); file modes and times do not count.
    pub fn digest(&self) -> PackageDigest {
        let mut list = Sha256::new();
        for (path, content) in &self.files {
            list.update(hex(&Sha256::digest(content)).as_bytes());
            list.update(b"  ");
            list.update(path.as_bytes());
            list.update(b"\n");
        }
        PackageDigest(list.finalize().into())
    }

    /// Checks the SOL 004 manifest when the package has one ([`manifest_path`]): every
    /// `Source` in the package that has a `Hash` must have that digest (`Algorithm` SHA-256,
    /// SHA-384 or SHA-512, hex, any case — ETSI GS NFV-SOL 004 §5.3 "manifest file"). Sources
    /// that are URIs (external artifacts) are not checked. Errors: a reason naming the manifest
    /// and the source.
    pub fn verify_manifest(&self) -> Result<(), FilesError> {
        let Some(mf) = self.manifest_path()? else {
            return Ok(());
        };
        let text = std::str::from_utf8(self.get(&mf).unwrap_or_default())
            .map_err(|_| FilesError(format!("manifest `{mf}` is not UTF-8 text")))?;
        for entry in manifest_entries(text) {
            let Some(hash) = entry.hash else { continue };
            if entry.source.contains("://") {
                continue;
            }
            let src = entry.source.strip_prefix("./").unwrap_or(entry.source);
            let Some(content) = self.get(src) else {
                return Err(FilesError(format!(
                    "manifest `{mf}` lists `{src}`, which is not in the package"
                )));
            };
            let actual = match entry.algorithm.map(str::to_ascii_uppercase).as_deref() {
                Some("SHA-256") => hex(&Sha256::digest(content)),
                Some("SHA-384") => hex(&sha2::Sha384::digest(content)),
                Some("SHA-512") => hex(&Sha512::digest(content)),
                Some(other) => {
                    return Err(FilesError(format!(
                        "manifest `{mf}`: `{src}` has Algorithm {other}; SHA-256, SHA-384 or SHA-512 are checked"
                    )));
                }
                None => {
                    return Err(FilesError(format!(
                        "manifest `{mf}`: `{src}` has a Hash but no Algorithm"
                    )));
                }
            };
            if !actual.eq_ignore_ascii_case(hash) {
                return Err(FilesError(format!(
                    "manifest `{mf}`: `{src}` does not match its Hash (the file differs from what the manifest lists)"
                )));
            }
        }
        Ok(())
    }

    /// The manifest file: `ETSI-Entry-Manifest` of `TOSCA-Metadata/TOSCA.meta` (SOL 004 §4.3.6),
    /// else the one `*.mf` file at the package root, else none. Errors: TOSCA.meta names a
    /// manifest the package lacks, or several root `*.mf` files.
    pub fn manifest_path(&self) -> Result<Option<String>, FilesError> {
        if let Some(meta) = self.get("TOSCA-Metadata/TOSCA.meta") {
            let meta = String::from_utf8_lossy(meta);
            if let Some(mf) = meta
                .lines()
                .find_map(|l| l.strip_prefix("ETSI-Entry-Manifest:"))
                .map(|s| s.trim().trim_start_matches("./").to_owned())
            {
                if self.files.contains_key(&mf) {
                    return Ok(Some(mf));
                }
                return Err(FilesError(format!(
                    "TOSCA.meta names the manifest `{mf}`, which is not in the package"
                )));
            }
        }
        let roots: Vec<&String> = self
            .files
            .keys()
            .filter(|p| !p.contains('/') && p.ends_with(".mf"))
            .collect();
        match roots.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some((*one).clone())),
            many => Err(FilesError(format!(
                "several manifests at the package root {many:?}; keep one"
            ))),
        }
    }
}

/// One `Source` block of a manifest.
struct ManifestEntry<'a> {
    source: &'a str,
    algorithm: Option<&'a str>,
    hash: Option<&'a str>,
}

/// The `Source:` blocks of a manifest in order; `Algorithm:` and `Hash:` lines belong to the
/// last `Source:` before them. Other lines (metadata, signatures) are ignored.
fn manifest_entries(text: &str) -> Vec<ManifestEntry<'_>> {
    let mut out: Vec<ManifestEntry<'_>> = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "Source" => out.push(ManifestEntry {
                source: value,
                algorithm: None,
                hash: None,
            }),
            "Algorithm" => {
                if let Some(e) = out.last_mut() {
                    e.algorithm = Some(value);
                }
            }
            "Hash" => {
                if let Some(e) = out.last_mut() {
                    e.hash = Some(value);
                }
            }
            _ => {}
        }
    }
    out
}

/// A package-relative file path as stored: non-empty, `/`-separated, not absolute, no empty,
/// `.` or `..` component, no `\`, no control character. Errors: the reason, naming the path.
pub fn check_path(path: &str) -> Result<(), FilesError> {
    let bad = |why: &str| Err(FilesError(format!("{path:?} {why}")));
    if path.is_empty() {
        return bad("is an empty name");
    }
    if path.starts_with('/') {
        return bad("is an absolute path");
    }
    if path.contains('\\') {
        return bad("contains a backslash");
    }
    if path.chars().any(char::is_control) {
        return bad("contains a control character");
    }
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return bad("has an empty, `.` or `..` component");
    }
    Ok(())
}

/// The SHA-256 digest naming a package's file set ([`PackageFiles::digest`]); shown and stored
/// as 64 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PackageDigest(pub [u8; 32]);

impl fmt::Display for PackageDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl FromStr for PackageDigest {
    type Err = FilesError;

    /// Parses 64 lowercase hex digits. Errors: anything else.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            FilesError(format!(
                "{s:?} is not a package digest (64 lowercase hex digits)"
            ))
        };
        if s.len() != 64
            || !s
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Self(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(files: &[(&str, &str)]) -> PackageFiles {
        let mut p = PackageFiles::new();
        for (path, body) in files {
            p.insert(path, body.as_bytes().to_vec(), &LIMITS).unwrap();
        }
        p
    }

    fn sha256_hex(s: &str) -> String {
        crate::digest::sha256_hex(s.as_bytes())
    }

    #[test]
    fn digest_is_the_sha256_of_the_sha256sum_list() {
        let p = set(&[("b.txt", "B"), ("a/x.yaml", "X")]);
        let list = format!(
            "{}  a/x.yaml\n{}  b.txt\n",
            sha256_hex("X"),
            sha256_hex("B")
        );
        assert_eq!(p.digest().to_string(), sha256_hex(&list));
        assert_eq!(
            p.digest().to_string().parse::<PackageDigest>(),
            Ok(p.digest())
        );
        // One byte changed: another digest.
        assert_ne!(
            set(&[("b.txt", "C"), ("a/x.yaml", "X")]).digest(),
            p.digest()
        );
        assert!("ABC".parse::<PackageDigest>().is_err());
        assert!("A".repeat(64).parse::<PackageDigest>().is_err());
    }

    #[test]
    fn limits_and_names_are_enforced() {
        let small = Limits {
            max_files: 2,
            max_file_bytes: 4,
            max_total_bytes: 6,
            max_ratio: 10,
        };
        let mut p = PackageFiles::new();
        p.insert("a", b"1234".to_vec(), &small).unwrap();
        let e = p.insert("b", b"12345".to_vec(), &small).unwrap_err();
        assert!(e.0.contains("per-file limit"), "{e}");
        let e = p.insert("c", b"123".to_vec(), &small).unwrap_err();
        assert!(e.0.contains("in total"), "{e}");
        p.insert("d", b"12".to_vec(), &small).unwrap();
        let e = p.insert("e", b"".to_vec(), &small).unwrap_err();
        assert!(e.0.contains("more than 2 files"), "{e}");
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "./a",
            "a//b",
            "a\\b",
            "a\nb",
            "..",
        ] {
            assert!(check_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_path("Definitions/v.yaml").is_ok());
    }

    #[test]
    fn manifest_digests_are_checked_when_present() {
        let meta = "TOSCA-Meta-File-Version: 1.0\nEntry-Definitions: Definitions/v.yaml\nETSI-Entry-Manifest: v.mf\n";
        let mf = |hash: &str| {
            format!(
                "metadata:\nvnf_product_name: t\n\nSource: Definitions/v.yaml\nAlgorithm: SHA-256\nHash: {hash}\n\nSource: https://example.invalid/x\nAlgorithm: SHA-256\nHash: 00\n"
            )
        };
        let good = set(&[
            ("TOSCA-Metadata/TOSCA.meta", meta),
            ("Definitions/v.yaml", "V"),
            ("v.mf", &mf(&sha256_hex("V").to_uppercase())),
        ]);
        assert_eq!(good.verify_manifest(), Ok(()));
        let bad = set(&[
            ("TOSCA-Metadata/TOSCA.meta", meta),
            ("Definitions/v.yaml", "V changed"),
            ("v.mf", &mf(&sha256_hex("V"))),
        ]);
        let e = bad.verify_manifest().unwrap_err();
        assert!(e.0.contains("`Definitions/v.yaml` does not match"), "{e}");
        let missing = set(&[
            ("TOSCA-Metadata/TOSCA.meta", meta),
            ("Definitions/v.yaml", "V"),
        ]);
        assert!(missing.verify_manifest().unwrap_err().0.contains("v.mf"));
        // No manifest: nothing to check.
        let none = set(&[("Definitions/v.yaml", "V")]);
        assert_eq!(none.verify_manifest(), Ok(()));
        // A root *.mf without TOSCA.meta naming it is the manifest.
        let root_mf = set(&[
            ("Definitions/v.yaml", "W"),
            (
                "v.mf",
                "Source: Definitions/v.yaml\nAlgorithm: SHA-512\nHash: 00\n",
            ),
        ]);
        assert!(root_mf.verify_manifest().is_err());
    }
}
