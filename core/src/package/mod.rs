//! VNF packages (an unpacked CSAR, ETSI GS NFV-SOL 004): locate the VNFD through
//! `TOSCA-Metadata/TOSCA.meta`, parse it ([`vnfd`]), and read the BaseHOT of a flavour and
//! package files (scripts, manifests) safely inside the package directory. [`files`] is a
//! package as files in memory (limits, manifest check, the digest naming its snapshot) and
//! [`csar`] unpacks a CSAR `.zip` into one.

pub mod csar;
pub mod files;
pub mod hot_gen;
pub mod vnfd;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

pub use files::{Limits, PackageDigest, PackageFiles};
pub use vnfd::Vnfd;

/// A package copied into the package store at intake (content-addressed, written once), as an
/// accepted operation records it; the engine and reconcile read only this copy.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The digest naming the file set.
    pub digest: PackageDigest,
    /// The snapshot directory, `<store>/sha256/<digest>`.
    pub dir: std::path::PathBuf,
    /// The operator's package path it was copied from (audit only).
    pub source: std::path::PathBuf,
    /// The VNFD, parsed from the snapshot.
    pub vnfd: std::sync::Arc<Vnfd>,
}

/// A package problem: which file and why.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// A file could not be read.
    #[error("VNF package {package}: cannot read {file}: {source}")]
    Read {
        /// Package directory.
        package: PathBuf,
        /// Package-relative file.
        file: String,
        /// I/O error.
        source: std::io::Error,
    },
    /// The package's layout or a file's content is not what SOL 004 / Heat expects.
    #[error("VNF package {package}: {file}: {reason}")]
    Invalid {
        /// Package directory.
        package: PathBuf,
        /// Package-relative file (or directory).
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// The VNFD could not be understood.
    #[error("VNF package {package}: {source}")]
    Vnfd {
        /// Package directory.
        package: PathBuf,
        /// The VNFD error, naming file and place.
        source: vnfd::VnfdError,
    },
}

/// The deepest nesting of YAML flow collections (`[`, `{`) a package file may have: what
/// `serde_yaml_ng` deserialises at most (its recursion limit), so no file it would accept is
/// refused.
pub const MAX_YAML_NESTING: usize = 128;

/// Refuses YAML `text` whose flow collections nest deeper than [`MAX_YAML_NESTING`], before it
/// is parsed: `serde_yaml_ng` refuses such a document only after its scanner went through all of
/// it, which costs about 90 µs per level (found by the `vnfd` fuzz target: a 20 KB `[[[…]]]` of
/// 10,000 levels took 0.9 s, so a VNFD at intake's 64 MiB file limit could take hours). Counts
/// `[`/`{` against `]`/`}` outside quoted scalars and comments. Errors: the reason, naming the line.
pub fn check_yaml_nesting(text: &str) -> Result<(), String> {
    let (mut depth, mut line) = (0usize, 1usize);
    let mut quote: Option<char> = None;
    let (mut comment, mut escaped, mut prev) = (false, false, '\n');
    for c in text.chars() {
        if c == '\n' {
            line += 1;
            comment = false;
        }
        match quote {
            _ if comment => {}
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' if !prev.is_alphanumeric() => quote = Some(c),
                '#' if prev.is_whitespace() => comment = true,
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_YAML_NESTING {
                        return Err(format!(
                            "line {line}: flow collections nested deeper than {MAX_YAML_NESTING} levels"
                        ));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = c;
    }
    Ok(())
}

/// The BaseHOT of one flavour: the top-level template and the nested templates it refers to.
#[derive(Debug, Clone, PartialEq)]
pub struct BaseHot {
    /// Package-relative path of the top-level template.
    pub top_path: String,
    /// The top-level template as a JSON value (Heat accepts JSON or YAML).
    pub template: serde_json::Value,
    /// Nested templates by file name (as `type: VDU1.yaml` refers to them), text as in the package.
    pub files: BTreeMap<String, String>,
}

impl BaseHot {
    /// `OS::Neutron::FloatingIP` resource name → the name of the port resource it is attached
    /// to (`port_id` or `port` is `get_resource` of it), over the top-level template and every
    /// nested one (Tacker's sample packages put a node's floating IP beside its port in the
    /// nested template, the VIP's in the top-level one). A nested template that does not parse
    /// adds nothing.
    pub fn floating_ip_ports(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut add = |t: &serde_json::Value| {
            let Some(res) = t.get("resources").and_then(serde_json::Value::as_object) else {
                return;
            };
            for (name, r) in res {
                if r.get("type").and_then(serde_json::Value::as_str)
                    != Some("OS::Neutron::FloatingIP")
                {
                    continue;
                }
                let props = &r["properties"];
                if let Some(port) = ["port_id", "port"]
                    .iter()
                    .find_map(|k| props.get(*k))
                    .and_then(|p| p.get("get_resource"))
                    .and_then(serde_json::Value::as_str)
                {
                    out.insert(name.clone(), port.to_owned());
                }
            }
        };
        add(&self.template);
        for text in self.files.values() {
            if let Ok(t) = serde_yaml_ng::from_str::<serde_json::Value>(text) {
                add(&t);
            }
        }
        out
    }
}

/// A loaded VNF package.
#[derive(Debug, Clone)]
pub struct VnfPackage {
    root: PathBuf,
    /// The VNFD (entry definitions and its local imports, merged).
    pub vnfd: Vnfd,
}

impl VnfPackage {
    /// Loads the package at `root` (a directory). Errors: [`PackageError`] naming the file.
    pub fn load(root: &Path) -> Result<Self, PackageError> {
        let mut pkg = Self {
            root: root.to_path_buf(),
            vnfd: Vnfd::default(),
        };
        let meta = pkg.read_text("TOSCA-Metadata/TOSCA.meta")?;
        let entry = meta
            .lines()
            .find_map(|l| l.strip_prefix("Entry-Definitions:"))
            .map(|s| s.trim().to_owned())
            .ok_or_else(|| pkg.invalid("TOSCA-Metadata/TOSCA.meta", "no Entry-Definitions line"))?;
        let mut queue = vec![entry];
        let mut seen = Vec::new();
        // Every definitions file in merge order, with the flavour it describes (if any).
        let mut read: Vec<(String, String, Option<String>)> = Vec::new();
        while let Some(file) = queue.pop() {
            if seen.contains(&file) {
                continue;
            }
            let text = pkg.read_text(&file)?;
            pkg.vnfd
                .merge_file(&file, &text)
                .map_err(|source| PackageError::Vnfd {
                    package: pkg.root.clone(),
                    source,
                })?;
            read.push((file.clone(), text.clone(), Vnfd::flavour_of_file(&text)));
            // Local imports are relative to the importing file; URLs (ETSI type files) are skipped.
            let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap_or_default();
            for imp in doc["imports"].as_sequence().into_iter().flatten() {
                let Some(imp) = imp.as_str().or_else(|| imp["file"].as_str()) else {
                    continue;
                };
                if imp.contains("://") {
                    continue;
                }
                let dir = Path::new(&file).parent().unwrap_or(Path::new(""));
                queue.push(dir.join(imp).to_string_lossy().into_owned());
            }
            seen.push(file);
        }
        let flavours: BTreeSet<&str> = read.iter().filter_map(|(_, _, f)| f.as_deref()).collect();
        if flavours.len() > 1 {
            for flavour in flavours {
                let mut vnfd = Vnfd::default();
                let files = read.iter().filter(|(_, _, f)| f.is_none()).chain(
                    read.iter()
                        .filter(|(_, _, f)| f.as_deref() == Some(flavour)),
                );
                for (file, text, _) in files {
                    vnfd.merge_file(file, text)
                        .map_err(|source| PackageError::Vnfd {
                            package: pkg.root.clone(),
                            source,
                        })?;
                }
                pkg.vnfd.flavours.insert(flavour.to_owned(), vnfd);
            }
        }
        Ok(pkg)
    }

    /// The package directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads a package file by package-relative path (no absolute paths, no `..`).
    pub fn read(&self, rel: &str) -> Result<Vec<u8>, PackageError> {
        let rel = rel.strip_prefix("./").unwrap_or(rel);
        let p = Path::new(rel);
        if p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(self.invalid(rel, "path leaves the package"));
        }
        std::fs::read(self.root.join(p)).map_err(|source| PackageError::Read {
            package: self.root.clone(),
            file: rel.to_owned(),
            source,
        })
    }

    /// Reads a package file as UTF-8 text.
    pub fn read_text(&self, rel: &str) -> Result<String, PackageError> {
        String::from_utf8(self.read(rel)?).map_err(|_| self.invalid(rel, "not UTF-8 text"))
    }

    /// The BaseHOT of `flavour`: exactly one top-level `*.yaml` in `BaseHOT/<flavour>/` and the
    /// nested templates in `BaseHOT/<flavour>/nested/`. A package without `BaseHOT/<flavour>/`
    /// whose VNFD describes `flavour` gets one generated from the VNFD ([`hot_gen::from_vnfd`]).
    /// Errors: missing directory for another flavour, several top-level templates (Tacker picks
    /// one by directory order; we refuse to guess), bad YAML, a VNFD the generator refuses.
    pub fn base_hot(&self, flavour: &str) -> Result<BaseHot, PackageError> {
        let dir_rel = format!("BaseHOT/{flavour}");
        let dir = self.root.join(&dir_rel);
        let vnfd = self.vnfd.for_flavour(flavour).ok();
        if let Some(vnfd) = vnfd.filter(|v| v.flavour_id == flavour)
            && std::fs::symlink_metadata(&dir)
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return hot_gen::from_vnfd(vnfd).map_err(|reason| self.invalid(&dir_rel, &reason));
        }
        let yaml_files = |d: &Path, rel: &str| -> Result<Vec<String>, PackageError> {
            let rd = std::fs::read_dir(d).map_err(|source| PackageError::Read {
                package: self.root.clone(),
                file: rel.to_owned(),
                source,
            })?;
            let mut v: Vec<String> = rd
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".yaml") || n.ends_with(".yml"))
                .collect();
            v.sort();
            Ok(v)
        };
        let tops = yaml_files(&dir, &dir_rel)?;
        let top = match tops.as_slice() {
            [one] => one.clone(),
            [] => return Err(self.invalid(&dir_rel, "no top-level HOT (*.yaml)")),
            many => {
                return Err(self.invalid(
                    &dir_rel,
                    &format!("several top-level HOTs {many:?}; keep one"),
                ));
            }
        };
        let top_path = format!("{dir_rel}/{top}");
        let text = self.read_text(&top_path)?;
        check_yaml_nesting(&text).map_err(|e| self.invalid(&top_path, &e))?;
        let template: serde_json::Value =
            serde_yaml_ng::from_str(&text).map_err(|e| self.invalid(&top_path, &e.to_string()))?;
        let mut files = BTreeMap::new();
        let nested_rel = format!("{dir_rel}/nested");
        if self.root.join(&nested_rel).is_dir() {
            for n in yaml_files(&self.root.join(&nested_rel), &nested_rel)? {
                let rel = format!("{nested_rel}/{n}");
                let body = self.read_text(&rel)?;
                check_yaml_nesting(&body).map_err(|e| self.invalid(&rel, &e))?;
                serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&body)
                    .map_err(|e| self.invalid(&rel, &e.to_string()))?;
                files.insert(n, body);
            }
        }
        Ok(BaseHot {
            top_path,
            template,
            files,
        })
    }

    fn invalid(&self, file: &str, reason: &str) -> PackageError {
        PackageError::Invalid {
            package: self.root.clone(),
            file: file.into(),
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_nested_deeper_than_serde_yaml_ng_takes_is_refused_before_parsing() {
        let at = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(check_yaml_nesting(&at(MAX_YAML_NESTING)), Ok(()));
        // serde_yaml_ng itself takes 128 levels and refuses 129: the check refuses nothing more.
        assert!(serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&at(MAX_YAML_NESTING)).is_ok());
        assert!(
            serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&at(MAX_YAML_NESTING + 1)).is_err()
        );
        let e = check_yaml_nesting(&format!("a: 1\nb: {}", at(10_000))).unwrap_err();
        assert_eq!(e, "line 2: flow collections nested deeper than 128 levels");
        // Brackets in quoted scalars and comments do not count.
        let quoted = format!(
            "a: \"{0}\"\nb: '{0}'\nc: 1 # {0}\nd: it's {{x: [1]}}\n",
            "[".repeat(200)
        );
        assert_eq!(check_yaml_nesting(&quoted), Ok(()));
        let mut vnfd = Vnfd::default();
        let e = vnfd
            .merge_file("Definitions/deep.yaml", &at(10_000))
            .unwrap_err();
        assert!(e.reason.contains("nested deeper than 128"), "{e}");
    }

    #[test]
    fn every_fixture_package_file_passes_the_nesting_check() {
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures"));
        let mut dirs = vec![root.to_path_buf()];
        let mut n = 0;
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "yaml" || x == "yml") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    assert_eq!(check_yaml_nesting(&text), Ok(()), "{}", p.display());
                    n += 1;
                }
            }
        }
        assert!(n > 20, "only {n} YAML fixtures found");
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .join("fixtures/packages")
            .join(name)
    }

    #[test]
    fn every_fixture_package_loads_with_its_base_hot() {
        for name in [
            "pv-k8s-cluster",
            "k8s-mgmtdriver-kubespray",
            "cir-k8s-cluster",
            "cir-private-registry",
            "individual-vnfc-management",
        ] {
            let pkg = VnfPackage::load(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!pkg.vnfd.vdus.is_empty(), "{name}: no VDUs");
            let hot = pkg
                .base_hot(&pkg.vnfd.flavour_id)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(hot.template["resources"].is_object(), "{name}");
        }
        let pv = VnfPackage::load(&fixture("pv-k8s-cluster")).unwrap();
        let hot = pv.base_hot("simple").unwrap();
        assert_eq!(
            hot.files.keys().collect::<Vec<_>>(),
            ["masterNode.yaml", "workerNode.yaml"]
        );
        assert_eq!(
            hot.template["resources"]["storage_server"]["type"],
            "OS::Nova::Server"
        );
    }

    #[test]
    fn reads_stay_inside_the_package() {
        let pv = VnfPackage::load(&fixture("pv-k8s-cluster")).unwrap();
        assert!(pv.read("./Files/kubernetes/nfs-pv1.yaml").is_ok());
        assert!(
            pv.read("../pv-k8s-cluster/Files/kubernetes/nfs-pv1.yaml")
                .is_err()
        );
        assert!(pv.read("/etc/passwd").is_err());
        assert!(matches!(
            pv.base_hot("gold"),
            Err(PackageError::Read { .. })
        ));
    }
}
