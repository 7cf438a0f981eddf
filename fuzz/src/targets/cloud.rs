//! What clouds send back: a JSON body decoded as the daemon's cloud adapter decodes Heat's stack
//! (`GET /stacks/{name}/{id}`), a resource of Heat's resource list, a Nova server, a Neutron port
//! and a Cinder volume ([`vnfkeeper_core::cloud`]'s tolerant structs, through `serde_json` as
//! `Reply::json` does).
//!
//! Properties: no panic; a stack, a resource, a port and a volume that decode encode and
//! decode again to the same value (a server's encoding is not Nova's shape: not checked); a stack's
//! `json` parameters and a server's addresses are read without a panic; a resource's `links`
//! give stack references without a panic.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use vnfkeeper_core::cloud::{Port, RawResource, Server, Stack, StackRef, Volume};

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T, what: &str) {
    let enc = serde_json::to_value(v).expect("encodes");
    let back: T = serde_json::from_value(enc)
        .unwrap_or_else(|e| panic!("{what}: its own encoding does not decode: {e}"));
    assert_eq!(&back, v, "{what}: does not round-trip");
}

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Ok(stack) = serde_json::from_value::<Stack>(doc.clone()) {
        round_trip(&stack, "Stack");
        for k in stack.parameters.keys() {
            let _ = stack.parameter_json(k);
        }
        let _ = (stack.reference(), stack.is_failed(), stack.is_in_progress());
    }
    if let Ok(server) = serde_json::from_value::<Server>(doc.clone()) {
        // No round trip: `Server`'s encoding is not Nova's wire shape (`fault`, `image` and
        // `os-extended-volumes:volumes_attached` are flattened when decoded) and nothing decodes it.
        let _ = server.ips();
        for net in server.addresses.keys() {
            let _ = server.ips_on(net);
        }
    }
    if let Ok(port) = serde_json::from_value::<Port>(doc.clone()) {
        round_trip(&port, "Port");
    }
    if let Ok(volume) = serde_json::from_value::<Volume>(doc.clone()) {
        round_trip(&volume, "Volume");
    }
    if let Ok(raw) = serde_json::from_value::<RawResource>(doc) {
        let r = raw.into_resource(&StackRef::new(
            "vnf-1",
            "0b5e6f5a-1d1a-4f37-9a83-2c5d2f5c8e11",
        ));
        round_trip(&r, "StackResource");
    }
}
