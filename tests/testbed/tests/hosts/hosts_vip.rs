//! A cluster VIP on the host farm, with the real Debian HAProxy and keepalived: three
//! control-plane hosts (kubeadm stand-in: `init` and two control-plane `join`s, each starting
//! the API server stand-in on :6443), HAProxy on each forwarding :16443 to the three :6443
//! (TCP mode) and keepalived's VRRP holding the VIP on one of them — the layout Tacker's
//! `install_k8s_cluster.sh` sets up for its HA cluster, here configured by the test in the same
//! shape. A fourth host reaches the API server stand-in at `https://VIP:16443/` through HAProxy;
//! when the VIP holder's host stops (as a server in Nova ERROR does), VRRP moves the VIP to
//! another master, which answers in turn; `kubeadm reset` stops a master's API server stand-in.
//! `scripts/demo ha` runs the same with Tacker's own script through the daemon.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::hosts_common::*;
use testbed::hosts::{HostFarm, HostProfile, HostSpec};

const CLUSTER: &str = "stack-vip";

fn spec(id: &str, ip: Ipv4Addr) -> HostSpec {
    HostSpec {
        server_id: id.into(),
        hostname: id.into(),
        ip,
        cluster: CLUSTER.into(),
        volumes: Vec::new(),
        profile: HostProfile::Debian,
    }
}

/// Runs `cmd` as root in host `id`; panics unless it succeeds; returns stdout.
async fn exec_ok(farm: &HostFarm, id: &str, cmd: &str) -> String {
    let o = farm.exec(id, cmd).await.unwrap();
    assert!(
        o.status.success(),
        "{id}: {cmd}: exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o)
}

/// `curl -k https://ADDR/` from host `id` (the real curl): `(HTTP status, body)`; status 0 when
/// nothing answered.
async fn get(farm: &HostFarm, id: &str, addr: &str) -> (u16, String) {
    let o = farm
        .exec(
            id,
            &format!("/usr/bin/curl -sk -m 2 -w '\\n%{{http_code}}' https://{addr}/"),
        )
        .await
        .unwrap();
    let out = stdout(&o);
    let (body, code) = out.rsplit_once('\n').unwrap_or(("", out.as_str()));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// The master whose eth0 holds `vip`, among `masters` (server ids) still running.
async fn holder(farm: &HostFarm, masters: &[&str], vip: Ipv4Addr) -> Option<String> {
    for m in masters {
        if let Ok(o) = farm.exec(m, "ip -4 -o addr show dev eth0").await
            && stdout(&o).contains(&format!(" {vip}/24 "))
        {
            return Some((*m).to_string());
        }
    }
    None
}

/// The API server stand-in's answer to an anonymous `GET /` (the Kubernetes API's 403 Status).
fn is_forbidden(status: u16, body: &str) -> bool {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    status == 403
        && v["kind"] == "Status"
        && v["reason"] == "Forbidden"
        && v["message"] == "forbidden: User \"system:anonymous\" cannot get path \"/\""
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces)"]
async fn hosts_vip_moves_between_masters_through_haproxy_and_keepalived() {
    let g = Guard::new("tbha", 109).await;
    let f = g.farm.clone();
    let masters = ["m11", "m12", "m13"];
    let ips: Vec<Ipv4Addr> = (11..=13).map(|n| g.ip(n)).collect();
    let vip = g.ip(10);
    let (a, b, c, w) = tokio::join!(
        f.start(spec("m11", ips[0])),
        f.start(spec("m12", ips[1])),
        f.start(spec("m13", ips[2])),
        f.start(spec("w14", g.ip(14)))
    );
    for r in [a, b, c, w] {
        r.unwrap();
    }

    // The control planes: kubeadm init on the first, control-plane joins on the others.
    for m in masters {
        exec_ok(
            &f,
            m,
            "apt-get install -y kubeadm haproxy keepalived >/dev/null",
        )
        .await;
    }
    exec_ok(
        &f,
        "m11",
        &format!("kubeadm init --control-plane-endpoint {vip}:16443 --upload-certs >/dev/null"),
    )
    .await;
    let st = f
        .kube(CLUSTER)
        .kubeadm_state()
        .unwrap()
        .expect("initialized");
    let token = st["tokens"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let (hash, key) = (
        st["ca_hash"].as_str().unwrap().to_string(),
        st["certificate_key"].as_str().unwrap().to_string(),
    );
    for m in &masters[1..] {
        exec_ok(
            &f,
            m,
            &format!(
                "kubeadm join {vip}:16443 --token {token} --discovery-token-ca-cert-hash sha256:{hash} \
                 --control-plane --certificate-key {key} >/dev/null"
            ),
        )
        .await;
    }
    // Each API server stand-in answers on its own :6443.
    for ip in &ips {
        let (code, body) = get(&f, "w14", &format!("{ip}:6443")).await;
        assert!(is_forbidden(code, &body), "{ip}:6443: {code} {body}");
    }

    // HAProxy :16443 → the three :6443, keepalived with the VIP (priority by position).
    let servers: String = ips
        .iter()
        .map(|ip| format!("    server  master{}  {ip}:6443 check\n", ip.octets()[3]))
        .collect();
    let haproxy = format!(
        "global\n    maxconn 256\n\ndefaults\n    mode tcp\n    timeout connect 5s\n    \
         timeout client 30s\n    timeout server 30s\n\nfrontend kubernetes-apiserver\n    \
         bind *:16443\n    default_backend kubernetes-apiserver\n\nbackend kubernetes-apiserver\n    \
         balance roundrobin\n{servers}"
    );
    for (i, m) in masters.iter().enumerate() {
        let keepalived = format!(
            "vrrp_script chk_haproxy {{\n    script \"killall -0 haproxy\"\n    interval 3\n    fall 3\n}}\n\
             vrrp_instance VRRP1 {{\n    state MASTER\n    interface eth0\n    virtual_router_id 51\n    \
             priority {}\n    advert_int 1\n    virtual_ipaddress {{\n        {vip}/24\n    }}\n    \
             track_script {{\n        chk_haproxy\n    }}\n}}\n",
            103 - i
        );
        f.write_file(m, "/etc/haproxy/haproxy.cfg", haproxy.as_bytes())
            .await
            .unwrap();
        f.write_file(m, "/etc/keepalived/keepalived.conf", keepalived.as_bytes())
            .await
            .unwrap();
        exec_ok(&f, m, "systemctl enable haproxy keepalived.service && systemctl start haproxy keepalived.service").await;
        assert_eq!(
            exec_ok(&f, m, "systemctl is-active haproxy keepalived").await,
            "active\nactive\n"
        );
        // the real binaries run, with the files above
        let procs = exec_ok(&f, m, "pgrep -a -x haproxy; pgrep -a -x keepalived").await;
        assert!(
            procs.contains("/usr/sbin/haproxy -D -f /etc/haproxy/haproxy.cfg")
                && procs.contains("/usr/sbin/keepalived -f /etc/keepalived/keepalived.conf"),
            "{m}: {procs}"
        );
    }

    // The VIP answers from the worker through HAProxy; some master holds it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = loop {
        if let Some(h) = holder(&f, &masters, vip).await {
            let (code, body) = get(&f, "w14", &format!("{vip}:16443")).await;
            if is_forbidden(code, &body) {
                break h;
            }
        }
        assert!(Instant::now() < deadline, "the VIP never answered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(first, "m11", "the highest VRRP priority holds the VIP");

    // The holder's host dies (a server in Nova ERROR): another master takes the VIP and answers.
    f.stop(&first).await.unwrap();
    let rest: Vec<&str> = masters.iter().copied().filter(|m| *m != first).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let second = loop {
        if let Some(h) = holder(&f, &rest, vip).await {
            let (code, body) = get(&f, "w14", &format!("{vip}:16443")).await;
            if is_forbidden(code, &body) {
                break h;
            }
        }
        assert!(Instant::now() < deadline, "the VIP did not move");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(rest.contains(&second.as_str()), "{second}");

    // kubeadm reset stops that master's API server stand-in; HAProxy's other backend serves.
    exec_ok(&f, &second, "kubeadm reset -f >/dev/null").await;
    let ip = ips[masters.iter().position(|m| *m == second).unwrap()];
    assert_eq!(
        get(&f, "w14", &format!("{ip}:6443")).await.0,
        0,
        "{second} after reset"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (code, body) = get(&f, "w14", &format!("{vip}:16443")).await;
        if is_forbidden(code, &body) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no backend answers after the reset"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // systemctl stop ends keepalived and haproxy for real.
    exec_ok(&f, &second, "systemctl stop keepalived haproxy").await;
    let o = f
        .exec(&second, "pgrep -x keepalived; pgrep -x haproxy")
        .await
        .unwrap();
    assert_eq!(stdout(&o), "", "processes left after systemctl stop");
    g.finish().await;
}

/// vnfkeeper's `k8s.haproxy_backends` step on a master whose HAProxy (the real Debian one,
/// started by the systemctl stand-in) was set up in the shape of Tacker's install script with a
/// master that has since been rebuilt at a new address: check says needed, apply rewrites the
/// backend and reloads, and the running HAProxy's own statistics list the new backend set; a
/// second check finds it in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces)"]
async fn hosts_haproxy_backends_step_reloads_the_real_haproxy() {
    let g = Guard::new("tbhb", 111).await;
    let f = g.farm.clone();
    f.start(spec("m11", g.ip(11))).await.unwrap();
    exec_ok(&f, "m11", "apt-get install -y haproxy >/dev/null").await;
    let line = |ip: Ipv4Addr| format!("    server  master{}  {ip}:6443 check\n", ip.octets()[3]);
    let old = [g.ip(11), g.ip(12), g.ip(13)];
    let cfg = |servers: String| {
        format!(
            "global\n    maxconn 256\n\ndefaults\n    mode tcp\n    timeout connect 5s\n    \
             timeout client 30s\n    timeout server 30s\n\nfrontend kubernetes-apiserver\n    \
             bind *:16443\n    default_backend kubernetes-apiserver\n\nbackend kubernetes-apiserver\n    \
             mode        tcp\n    balance     roundrobin\n{servers}listen stats\n    mode http\n    \
             bind               *:1080\n    stats uri          /admin?stats\n"
        )
    };
    f.write_file(
        "m11",
        "/etc/haproxy/haproxy.cfg",
        cfg(old.iter().map(|ip| line(*ip)).collect()).as_bytes(),
    )
    .await
    .unwrap();
    exec_ok(&f, "m11", "systemctl start haproxy").await;
    let backends = || async {
        let csv = exec_ok(
            &f,
            "m11",
            "/usr/bin/curl -s -m 5 'http://127.0.0.1:1080/admin?stats;csv'",
        )
        .await;
        let mut names: Vec<String> = csv
            .lines()
            .filter_map(|l| l.strip_prefix("kubernetes-apiserver,"))
            .filter_map(|l| l.split(',').next())
            .filter(|n| n.starts_with("master"))
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    };
    assert_eq!(backends().await, ["master11", "master12", "master13"]);

    // master13 was rebuilt at .23.
    let now = [g.ip(11), g.ip(12), g.ip(23)];
    let masters: Vec<(String, std::net::IpAddr)> = now
        .iter()
        .map(|ip| (format!("master{}", ip.octets()[3]), (*ip).into()))
        .collect();
    let step = vnfkeeper_core::recipes::k8s_haproxy_backends("m11", &masters);
    f.write_file("m11", "/tmp/step.sh", step.script_text().as_bytes())
        .await
        .unwrap();
    for (i, a) in step.args.iter().enumerate() {
        f.write_file("m11", &format!("/tmp/arg{i}"), a.as_bytes())
            .await
            .unwrap();
    }
    let run = |mode: &'static str| {
        let f = f.clone();
        async move {
            let o = f
                .exec(
                    "m11",
                    &format!(
                        "sh /tmp/step.sh {mode} \"$(cat /tmp/arg0)\" \"$(cat /tmp/arg1)\" \
                         \"$(cat /tmp/arg2)\" \"$(cat /tmp/arg3)\""
                    ),
                )
                .await
                .unwrap();
            (o.status.code(), stdout(&o))
        }
    };
    let pid = exec_ok(&f, "m11", "cat /run/haproxy.pid").await;
    let (code, out) = run("check").await;
    assert_eq!(code, Some(10), "{out}");
    let (code, out) = run("apply").await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        String::from_utf8(
            f.read_file("m11", "/etc/haproxy/haproxy.cfg")
                .await
                .unwrap()
        )
        .unwrap(),
        cfg(now.iter().map(|ip| line(*ip)).collect())
    );
    // The soft reload: a new HAProxy took over, and it serves the new backend set.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if backends().await == ["master11", "master12", "master23"] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "HAProxy did not load the new backends"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_ne!(exec_ok(&f, "m11", "cat /run/haproxy.pid").await, pid);
    let (code, out) = run("check").await;
    assert_eq!(code, Some(0), "{out}");
    exec_ok(&f, "m11", "systemctl stop haproxy").await;
    g.finish().await;
}
