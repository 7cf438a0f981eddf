//! One VNFD file: its text goes to [`Vnfd::merge_file`], what [`VnfPackage::load`] calls on the
//! entry definitions and each local import (`serde_yaml_ng` then the TOSCA walk).
//!
//! Properties: no panic and bounded memory for hostile YAML — aliases (a billion-laughs document
//! is in the corpus), deep nesting, huge numbers; merging is deterministic; a failed merge's error
//! names the file it was given.
//!
//! [`VnfPackage::load`]: vnfkeeper_core::package::VnfPackage::load

use vnfkeeper_core::package::Vnfd;

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let text = crate::text(data);
    let mut a = Vnfd::default();
    let ra = a.merge_file("Definitions/fuzz.yaml", text);
    let mut b = Vnfd::default();
    let rb = b.merge_file("Definitions/fuzz.yaml", text);
    assert_eq!(ra.is_ok(), rb.is_ok(), "merging is not deterministic");
    match ra {
        Ok(()) => assert_eq!(a, b, "merging is not deterministic"),
        Err(e) => {
            assert_eq!(e.file, "Definitions/fuzz.yaml");
            let _ = e.to_string();
        }
    }
}
