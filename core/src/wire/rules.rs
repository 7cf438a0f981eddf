//! Value-level rules shared by the request validators: identifiers, CIDRs, IP addresses,
//! paths, ports, user names, proxy URLs.
//!
//! Each rule is a pure function over one string. It returns `Err(reason)` for a defect and
//! `Ok(Some(note))` for a value that is accepted but deserves a warning. Reasons and notes never
//! contain the checked value unless the function says so (values of secret fields are never
//! passed to a rule that echoes).

use std::net::IpAddr;

use ipnet::IpNet;

/// Longest identifier accepted for `vnfInstanceId`, `vnfLcmOpOccId` and `requestId`.
pub const MAX_ID_LEN: usize = 128;

/// `vnfInstanceId` / `vnfLcmOpOccId` / `requestId`: 1–128 characters of `[A-Za-z0-9._-]`, not
/// starting with `.` (these end up in file names and log lines).
pub fn identifier(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty (1-128 characters of [A-Za-z0-9._-])".into());
    }
    if s.len() > MAX_ID_LEN {
        return Err(format!(
            "is {} characters long; at most {MAX_ID_LEN} allowed",
            s.len()
        ));
    }
    if s.starts_with('.') {
        return Err("must not start with '.'".into());
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "contains {}; only [A-Za-z0-9._-] is allowed",
            describe_char(c)
        ));
    }
    Ok(())
}

/// A VNFD/BaseHOT name (CP, VDU, aspect, Heat resource): 1–255 characters of `[A-Za-z0-9._-]`.
pub fn resource_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.len() > 255 {
        return Err("is longer than 255 characters".into());
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "contains {}; a VNFD/Heat resource name is [A-Za-z0-9._-]",
            describe_char(c)
        ));
    }
    Ok(())
}

/// A POSIX login name used for SSH: `^[a-z_][a-z0-9_-]{0,31}$`.
pub fn posix_username(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 32
        && s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err("is not a POSIX user name (^[a-z_][a-z0-9_-]{0,31}$)".into())
    }
}

/// A credential (password, registry user name): any non-empty string. The value is never echoed.
pub fn secret_nonempty(s: &str) -> Result<(), String> {
    if s.is_empty() {
        Err("must not be empty".into())
    } else {
        Ok(())
    }
}

/// Free text that is passed on (e.g. `vim_name`, `cause`): non-empty, no control characters.
pub fn plain_text(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Err(format!("contains {}", describe_char(c)));
    }
    Ok(())
}

/// An IP address (IPv4 or IPv6) without prefix, port or zone.
pub fn ip_address(s: &str) -> Result<IpAddr, String> {
    s.parse::<IpAddr>().map_err(|_| {
        if s.contains('/') {
            "is not an IP address (a prefix length is not allowed here)".to_string()
        } else {
            "is not an IPv4 or IPv6 address".to_string()
        }
    })
}

/// An IP address that a client can connect to: not unspecified (`0.0.0.0`, `::`), which
/// would reach the local host.
pub fn connectable_ip(s: &str) -> Result<IpAddr, String> {
    let ip = ip_address(s)?;
    if ip.is_unspecified() {
        return Err("is the unspecified address (a placeholder); give the server's address".into());
    }
    Ok(ip)
}

/// A CIDR `address/prefix`. Host bits set are accepted with a note naming the network; the
/// value is echoed in the note (CIDR fields are not secret).
pub fn cidr(s: &str) -> Result<(IpNet, Option<String>), String> {
    let Some((_, prefix)) = s.split_once('/') else {
        return Err("is not a CIDR (expected address/prefix, e.g. 10.0.0.0/24)".into());
    };
    if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
        return Err("is not a CIDR: the prefix length is not a number".into());
    }
    let net: IpNet = s.parse().map_err(|_| {
        "is not a CIDR (bad address, or prefix length too large for the address family)".to_string()
    })?;
    let normal = net.trunc();
    if normal != net {
        Ok((
            normal,
            Some(format!(
                "{s} has host bits set; it is used as the network {normal}"
            )),
        ))
    } else {
        Ok((net, None))
    }
}

/// An NFS export target: a CIDR, or a single IP address (taken as /32 or /128).
pub fn export_target(s: &str) -> Result<(IpNet, Option<String>), String> {
    if s.contains('/') {
        cidr(s)
    } else {
        let ip = ip_address(s)
            .map_err(|_| "is not a CIDR or IP address (e.g. 10.10.0.0/24)".to_string())?;
        Ok((IpNet::from(ip), None))
    }
}

/// An absolute, normalised directory on a VM (`mount_to`, `export_dir`, remote paths): starts
/// with `/`, only `[A-Za-z0-9._/-]`, no `.`/`..` component, no `//`, no trailing `/`, not `/`.
pub fn absolute_dir(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty (an absolute directory path)".into());
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/')))
    {
        return Err(format!(
            "contains {}; only [A-Za-z0-9._/-] is allowed in a directory path",
            describe_char(c)
        ));
    }
    if !s.starts_with('/') {
        return Err("is not an absolute path (must start with '/')".into());
    }
    if s == "/" {
        return Err("must not be the root directory".into());
    }
    if s.ends_with('/') {
        return Err("is not normalised: trailing '/'".into());
    }
    if s.contains("//") {
        return Err("is not normalised: contains '//'".into());
    }
    if s.split('/').any(|c| c == "." || c == "..") {
        return Err("is not normalised: contains a '.' or '..' component".into());
    }
    if s.split('/').any(|c| c.starts_with('-')) {
        return Err("has a component starting with '-'".into());
    }
    Ok(())
}

/// A path inside the VNF package (`script_path`, `pv_manifest_file_path`, `image_path`,
/// `certificate_path`, `lcm-operation-user-data`): relative, no `..` component, only
/// `[A-Za-z0-9._/+-]`. Returns the normalised path (`./` and `.` components and repeated `/`
/// removed).
pub fn package_path(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("must not be empty (a path inside the VNF package)".into());
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '+')))
    {
        return Err(format!(
            "contains {}; only [A-Za-z0-9._/+-] is allowed in a package path",
            describe_char(c)
        ));
    }
    if s.starts_with('/') {
        return Err("is absolute; it must be relative to the VNF package root".into());
    }
    let parts: Vec<&str> = s
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if parts.contains(&"..") {
        return Err("contains a '..' component; it must stay inside the VNF package".into());
    }
    if parts.is_empty() {
        return Err("names the package root, not a file".into());
    }
    if s.ends_with('/') {
        return Err("ends with '/'; it must name a file".into());
    }
    Ok(parts.join("/"))
}

/// A TCP port number 1–65535 given as a JSON number.
pub fn port_number(v: &serde_json::Value) -> Result<u16, String> {
    match v.as_u64() {
        Some(n) if (1..=65535).contains(&n) => Ok(n as u16),
        Some(n) => Err(format!("{n} is not a TCP port (1-65535)")),
        None if v.is_number() => Err("is not a TCP port (an integer 1-65535)".into()),
        None => Err(format!(
            "expected an integer 1-65535, found {}",
            json_type(v)
        )),
    }
}

/// A DNS host name (RFC 1123 labels), at most 253 characters.
pub fn hostname(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err("is not a host name".into());
    }
    for label in s.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return Err("is not a host name (labels of [A-Za-z0-9-], separated by '.')".into());
        }
    }
    Ok(())
}

/// A registry server `host[:port]`: host is a DNS name, an IPv4 address or `[IPv6]`.
pub fn server_address(s: &str) -> Result<(), String> {
    if s.contains("://") {
        return Err("must be host[:port] without a scheme (e.g. 192.168.0.10:5000)".into());
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some((h, tail)) = rest.split_once(']') else {
            return Err("has an unterminated '[' (IPv6 form is [address]:port)".into());
        };
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Err("has an invalid IPv6 address inside [...]".into());
        }
        match tail {
            "" => (None, None),
            t => match t.strip_prefix(':') {
                Some(p) => (None, Some(p)),
                None => return Err("has text after ']' that is not :port".into()),
            },
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (Some(h), Some(p)),
            None => (Some(s), None),
        }
    };
    if let Some(h) = host {
        let looks_ip = !h.is_empty() && h.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        if looks_ip {
            if h.parse::<std::net::Ipv4Addr>().is_err() {
                return Err("has an invalid IPv4 address".into());
            }
        } else if hostname(h).is_err() {
            return Err("is not host[:port] (host must be a DNS name or an IP address)".into());
        }
    }
    if let Some(p) = port {
        match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) && !p.starts_with('0') => {}
            _ => return Err("has a port that is not a number 1-65535".into()),
        }
    }
    Ok(())
}

/// An `/etc/hosts` line `"<IP address> <FQDN> [alias…]"`. The value is not echoed.
pub fn hosts_line(s: &str) -> Result<(), String> {
    if s.chars().any(|c| c.is_control()) {
        return Err(
            "contains a control character (e.g. a newline); it must be one /etc/hosts line".into(),
        );
    }
    let mut words = s.split_ascii_whitespace();
    let Some(ip) = words.next() else {
        return Err("must not be empty (\"<IP address> <FQDN>\")".into());
    };
    if ip_address(ip).is_err() {
        return Err("does not start with an IP address (\"<IP address> <FQDN>\")".into());
    }
    let mut names = 0;
    for w in words {
        if hostname(w).is_err() {
            return Err("has a name that is not a host name (\"<IP address> <FQDN>\")".into());
        }
        names += 1;
    }
    if names == 0 {
        return Err("has no host name after the IP address (\"<IP address> <FQDN>\")".into());
    }
    Ok(())
}

/// `http_proxy`/`https_proxy`: `http(s)://[user[:password]@]host[:port][/]`. The URL may carry
/// credentials, so neither the reason nor the note contains any part of it. A non-numeric
/// port (the placeholders `port1`, `port2` of the Tacker specs' example requests) is accepted
/// with a note.
pub fn proxy_url(s: &str) -> Result<Option<String>, String> {
    const FORM: &str = "http://[user:password@]host:port";
    if s.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "contains whitespace or a control character (value not shown; expected {FORM})"
        ));
    }
    let Some((scheme, rest)) = s.split_once("://") else {
        return Err(format!("is not a URL (value not shown; expected {FORM})"));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "has a scheme other than http or https (value not shown; expected {FORM})"
        ));
    }
    let authority = rest.split_once('/').map_or(rest, |(a, _)| a);
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = if hostport.starts_with('[') {
        match hostport.split_once(']') {
            Some((h, t)) => (&h[1..], t.strip_prefix(':')),
            None => {
                return Err(format!(
                    "has an unterminated IPv6 host (value not shown; expected {FORM})"
                ));
            }
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err(format!("has no host (value not shown; expected {FORM})"));
    }
    if host.parse::<IpAddr>().is_err() && hostname(host).is_err() {
        return Err(format!(
            "has a host that is neither a host name nor an IP address (value not shown; expected {FORM})"
        ));
    }
    match port {
        None | Some("") => Ok(None),
        Some(p) if p.bytes().all(|b| b.is_ascii_digit()) => match p.parse::<u32>() {
            Ok(n) if (1..=65535).contains(&n) => Ok(None),
            _ => Err("has a port outside 1-65535 (value not shown)".into()),
        },
        Some(_) => Ok(Some(
            "the port is not a number (a placeholder?); the proxy cannot be used until it is replaced (value not shown: it may carry credentials)".into(),
        )),
    }
}

/// One `no_proxy` entry: a CIDR (host bits: note), an IP address, or a domain (`.example.com`,
/// `*.example.com`, `example.com`).
pub fn no_proxy_entry(s: &str) -> Result<Option<String>, String> {
    if s.contains('/') {
        return cidr(s).map(|(_, note)| note);
    }
    if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') || s.contains(':') {
        return ip_address(s).map(|_| None);
    }
    let domain = s
        .strip_prefix("*.")
        .or_else(|| s.strip_prefix('.'))
        .unwrap_or(s);
    if s == "*" || hostname(domain).is_ok() {
        Ok(None)
    } else {
        Err("is not a CIDR, an IP address or a domain name".into())
    }
}

/// A Python class name (`lcm-operation-user-data-class`): `^[A-Za-z_][A-Za-z0-9_]*$`.
pub fn python_class(s: &str) -> Result<(), String> {
    let ok = s
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err("is not a Python class name (^[A-Za-z_][A-Za-z0-9_]*$)".into())
    }
}

/// JSON type name for reasons ("string", "number", ...).
pub fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Names a character for a reason without quoting surrounding text.
fn describe_char(c: char) -> String {
    match c {
        ' ' => "a space".into(),
        '\n' => "a newline".into(),
        '\t' => "a tab".into(),
        c if c.is_control() => format!("control character U+{:04X}", c as u32),
        c => format!("'{c}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        for ok in ["a", "vnf-pv.1", "A_b-9", &"x".repeat(128)] {
            assert!(identifier(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".hidden",
            "a/b",
            "a b",
            "ä",
            &"x".repeat(129),
            "a\n",
            "..",
            "$(id)",
        ] {
            assert!(identifier(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn usernames() {
        for ok in ["ubuntu", "_svc", "ansible", "a-b_1", &"a".repeat(32)] {
            assert!(posix_username(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Ubuntu",
            "1user",
            "-x",
            "root;id",
            "a b",
            &"a".repeat(33),
            "user$",
        ] {
            assert!(posix_username(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cidrs() {
        assert_eq!(
            cidr("10.10.0.0/24").unwrap(),
            ("10.10.0.0/24".parse().unwrap(), None)
        );
        let (net, note) = cidr("192.168.3.0/16").unwrap();
        assert_eq!(net.to_string(), "192.168.0.0/16");
        assert!(note.unwrap().contains("192.168.0.0/16"));
        assert!(cidr("fd00::/64").is_ok());
        for bad in [
            "10.10.0.0",
            "10.10.0.0/33",
            "10.10.0/24",
            "10.10.0.0/",
            "10.10.0.0/x",
            "garbage",
            "10.10.0.0/24 ",
            "::/129",
        ] {
            assert!(cidr(bad).is_err(), "{bad:?}");
        }
        assert!(export_target("10.0.0.5").is_ok());
        assert!(export_target("10.0.0.256").is_err());
    }

    #[test]
    fn ips() {
        assert!(ip_address("192.168.0.1").is_ok());
        assert!(ip_address("fe80::1").is_ok());
        for bad in [
            "192.168.0.1/24",
            "192.168.0.256",
            "host",
            "192.168.0.1:22",
            "",
        ] {
            assert!(ip_address(bad).is_err(), "{bad:?}");
        }
        assert!(connectable_ip("0.0.0.0").is_err());
        assert!(connectable_ip("::").is_err());
        assert!(connectable_ip("10.0.0.1").is_ok());
    }

    #[test]
    fn absolute_dirs() {
        for ok in ["/volume", "/volume/nfs/pv1", "/a.b/c_d-e"] {
            assert!(absolute_dir(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/",
            "volume",
            "/volume/",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/a;rm -rf",
            "/a$(id)",
            "/a`id`",
            "/a b",
            "/a\nb",
            "/a/-rf",
            "/a|b",
            "/a&b",
            "/a>b",
            "/a'b",
        ] {
            assert!(absolute_dir(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn package_paths() {
        assert_eq!(package_path("./UserData/x.py").unwrap(), "UserData/x.py");
        assert_eq!(package_path("Scripts//a.sh").unwrap(), "Scripts/a.sh");
        assert_eq!(package_path("Files/./a").unwrap(), "Files/a");
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "Files/../../x",
            "a/..",
            ".",
            "./",
            "Files/",
            "a b",
            "a;b",
            "a\\b",
        ] {
            assert!(package_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ports() {
        use serde_json::json;
        assert_eq!(port_number(&json!(5000)).unwrap(), 5000);
        assert_eq!(port_number(&json!(65535)).unwrap(), 65535);
        for bad in [
            json!(0),
            json!(70000),
            json!(-1),
            json!(50.5),
            json!("5000"),
            json!(null),
        ] {
            assert!(port_number(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn servers_and_hosts() {
        for ok in [
            "192.168.0.10:5000",
            "registry.example.com",
            "[fd00::1]:5000",
            "reg:443",
        ] {
            assert!(server_address(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://reg",
            "reg:0",
            "reg:70000",
            "reg:x",
            "999.1.1.1:5000",
            "a b",
            "[fd00::1",
            "",
        ] {
            assert!(server_address(bad).is_err(), "{bad:?}");
        }
        assert!(hosts_line("192.168.0.20 registry.example.com").is_ok());
        for bad in [
            "192.168.0.20",
            "registry.example.com 1.2.3.4",
            "1.2.3.4 a\n5.6.7.8 b",
            "1.2.3.4 a;b",
            "",
        ] {
            assert!(hosts_line(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn proxies_never_echo() {
        let seed = "http://user1:password1@host1:port1";
        let note = proxy_url(seed).unwrap().unwrap();
        assert!(!note.contains("password1") && !note.contains("user1"));
        assert_eq!(proxy_url("http://proxy.example.com:3128").unwrap(), None);
        assert_eq!(proxy_url("https://u:p@10.0.0.1:8080/").unwrap(), None);
        for bad in [
            "user:secretpw@host:1",
            "ftp://u:secretpw@h:1",
            "http://u:secretpw@:1",
            "http://u:secretpw@h:99999",
            "http://u:secret pw@h:1",
        ] {
            let e = proxy_url(bad).unwrap_err();
            assert!(!e.contains("secret"), "{e}");
        }
    }

    #[test]
    fn no_proxy_entries() {
        for ok in [
            "192.168.246.0/24",
            "10.0.0.1",
            "registry.example.com",
            ".example.com",
            "*.example.com",
            "localhost",
            "::1",
        ] {
            assert!(no_proxy_entry(ok).is_ok(), "{ok}");
        }
        assert!(no_proxy_entry("10.0.0.1/24").unwrap().is_some());
        for bad in ["10.0.0.0/40", "10.0.0.300", "a b", "exa_mple.com"] {
            assert!(no_proxy_entry(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn python_classes() {
        assert!(python_class("KubernetesClusterUserData").is_ok());
        assert!(python_class("1X").is_err());
        assert!(python_class("a.b").is_err());
    }
}
