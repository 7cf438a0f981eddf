//! The configuration file: its text goes to [`Settings::parse`], as `Settings::load` (the daemon's
//! start, `config check`) does after reading it.
//!
//! Properties: an error displays (naming the key); accepted settings printed by
//! [`Settings::to_toml`] (what `vnfkeeper config check` prints) parse again to the same settings.

use std::path::Path;

use vnfkeeper::config::Settings;

/// The target: see the module documentation.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return; // `Settings::load` reads with `read_to_string`: not UTF-8 is an I/O error there.
    };
    let path = Path::new("/etc/vnfkeeper/vnfkeeper.toml");
    match Settings::parse(text, path) {
        Err(e) => {
            let _ = e.to_string();
        }
        Ok(settings) => {
            let printed = settings.to_toml();
            match Settings::parse(&printed, path) {
                Ok(again) => assert_eq!(again, settings, "to_toml does not round-trip:\n{printed}"),
                Err(e) => panic!("to_toml's output is rejected: {e}\n{printed}"),
            }
        }
    }
}
