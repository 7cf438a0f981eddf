//! `testbed` command: serve the simulated cloud, set up packages, remove leftovers.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use testbed::cloud::{CloudOptions, Testbed};

mod tacker_cli;

/// Test infrastructure for vnfkeeper: a simulated OpenStack cloud whose servers are real SSH hosts.
#[derive(Parser, Debug)]
#[command(name = "testbed", version)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the simulated cloud in the foreground; writes DIR/clouds.yaml (cloud `testbed`) once
    /// ready; SIGTERM/SIGINT tear every host down.
    Serve {
        /// State directory (clouds.yaml, host farm state).
        #[arg(long)]
        state_dir: PathBuf,
        /// Listen address: loopback, or (with hosts) the bridge's address, `.1` of --subnet, for
        /// clients in namespaces on the bridge; port 0 picks a free port.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Servers are records only (no network namespaces, no sshd, no root needed).
        #[arg(long)]
        no_hosts: bool,
        /// Name prefix of the farm's namespaces, links and files.
        #[arg(long, default_value = "tb")]
        prefix: String,
        /// The testbed subnet; .1 is the bridge, servers get .10 upwards.
        #[arg(long, default_value = "10.231.0.0/24")]
        subnet: String,
        /// Password of user `admin` (written into clouds.yaml).
        #[arg(long, default_value = "testbed-secret")]
        password: String,
        /// Also start the kubespray flavour's Ansible server (at the subnet's last address;
        /// DIR/ansible-server.json says how to reach it). Needs hosts.
        #[arg(long)]
        ansible_server: bool,
        /// `simulated` (the testbed's own Keystone and Heat) or `real`: Keystone 30.0.0 and
        /// Heat 27.0.1 from PyPI (cached venvs of scripts/openstack-venv) with a MariaDB and a
        /// RabbitMQ of their own under DIR/openstack, processes tagged with the prefix;
        /// clouds.yaml then points at the real Keystone; `real-tacker`: `real` and Tacker
        /// 16.0.0 (tacker-server and tacker-conductor, catalog type nfv-orchestration) from the
        /// venv of scripts/tacker-venv.
        #[arg(long, default_value = "simulated", value_parser = ["simulated", "real", "real-tacker"])]
        control_plane: String,
    },
    /// Drive the Tacker of a running `testbed serve` (its stand-in, or the real one with
    /// `--control-plane real-tacker`) as an operator would (Keystone token, `Version: 2.0.0`):
    /// register (stand-in) or onboard (real) a package, create, instantiate, heal, scale,
    /// terminate.
    Tacker {
        /// The clouds.yaml `testbed serve` wrote (its `testbed` entry).
        #[arg(long)]
        clouds_yaml: PathBuf,
        #[command(subcommand)]
        cmd: tacker_cli::TackerCmd,
    },
    /// Install the packages hosts need (sshd, sudo, nfs-ganesha, …); needs root.
    Setup,
    /// Remove leftovers of crashed runs (namespaces, links, loop devices, mounts, processes,
    /// a real control plane's processes).
    Down {
        /// Everything with the prefix (required: there is no per-run selection).
        #[arg(long)]
        all: bool,
        /// Name prefix.
        #[arg(long, default_value = "tb")]
        prefix: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().cmd {
        Cmd::Serve {
            state_dir,
            listen,
            no_hosts,
            prefix,
            subnet,
            password,
            ansible_server,
            control_plane,
        } => {
            let control_plane = match control_plane.as_str() {
                "real" => testbed::cloud::ControlPlane::Real(prefix.clone()),
                "real-tacker" => testbed::cloud::ControlPlane::RealWithTacker(prefix.clone()),
                _ => testbed::cloud::ControlPlane::Simulated,
            };
            let opts = CloudOptions {
                state_dir,
                listen,
                subnet,
                password,
                farm: None,
                ansible_server,
                control_plane,
            };
            serve(opts, no_hosts, prefix).await
        }
        Cmd::Tacker { clouds_yaml, cmd } => tacker_cli::run(&clouds_yaml, cmd).await,
        Cmd::Setup => testbed::hosts::setup_packages().await,
        Cmd::Down { all, prefix } => {
            anyhow::ensure!(all, "pass --all: down removes everything with the prefix");
            let report = testbed::hosts::down_all(&prefix).await?;
            println!("{report:#?}");
            anyhow::ensure!(
                report.errors.is_empty(),
                "some leftovers could not be removed"
            );
            Ok(())
        }
    }
}

async fn serve(mut opts: CloudOptions, no_hosts: bool, prefix: String) -> anyhow::Result<()> {
    std::fs::create_dir_all(&opts.state_dir)
        .with_context(|| format!("creating {}", opts.state_dir.display()))?;
    let farm = if no_hosts {
        None
    } else {
        Some(testbed::cloud::farm::start_farm(&opts.state_dir, &prefix, &opts.subnet).await?)
    };
    opts.farm = farm.clone();
    // Signals count from here: a real control plane takes half a minute to start, and a signal
    // meanwhile drops the start, which stops whatever of it runs already.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let started = tokio::select! {
        r = Testbed::start(opts) => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted while starting")),
        _ = term.recv() => Err(anyhow::anyhow!("terminated while starting")),
    };
    let tb = match started {
        Ok(tb) => tb,
        Err(e) => {
            if let Some(f) = farm {
                f.shutdown().await;
            }
            return Err(e);
        }
    };
    println!(
        "testbed: listening on {} (port {})",
        tb.base_url(),
        tb.addr().port()
    );
    println!(
        "testbed: clouds.yaml at {} (cloud `testbed`)",
        tb.clouds_yaml().display()
    );
    if let Some(real) = tb.real() {
        println!(
            "testbed: real Keystone {} at {}, real Heat {} at {} (up in {:.1} s)",
            testbed::cloud::real::KEYSTONE_VERSION,
            real.keystone_url,
            testbed::cloud::real::HEAT_VERSION,
            real.heat_url,
            real.start_time.as_secs_f64()
        );
        if let Some(url) = &real.tacker_url {
            println!(
                "testbed: real Tacker {} at {url}",
                testbed::cloud::real::TACKER_VERSION
            );
        }
    }
    if let Some((a, path)) = tb.ansible_server() {
        println!(
            "testbed: Ansible server {} (user {}), kubespray stand-in at {}; described in {}",
            a.ip_address,
            a.username,
            a.kubespray_root_path,
            path.display()
        );
    }
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("signal received: stopping the cloud and every host");
    tb.shutdown().await;
    Ok(())
}
