//! Every step vnfkeeper runs on a host, as one closed set: a step's identity, its script and
//! how the engine and reconcile treat it, decided here rather than by comparing names.
//!
//! A stored plan and the step journal name a step by its dotted name (`storage.filesystem`):
//! [`StepKind::name`] and [`StepKind::parse`] are that stored form, unchanged since plans were
//! first stored, so that plans and journals written earlier load and resume.

/// Declares [`StepKind`] with, for each step, its stored name and its script under
/// `recipes/scripts/`, so that a step without a script cannot exist.
macro_rules! step_kinds {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal, $file:literal;)*) => {
        /// One kind of check-then-apply step (see the module documentation of
        /// [`crate::recipes`]). Serialized as its dotted name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum StepKind {
            $($(#[doc = $doc])* $variant,)*
        }

        impl StepKind {
            /// Every step kind, in declaration order.
            pub const ALL: &'static [StepKind] = &[$(StepKind::$variant),*];

            /// The stored dotted name, e.g. `storage.filesystem`.
            pub fn name(self) -> &'static str {
                match self {
                    $(StepKind::$variant => $name,)*
                }
            }

            /// The step's own script text (without the common prelude).
            pub fn script(self) -> &'static str {
                match self {
                    $(StepKind::$variant => include_str!(concat!("scripts/", $file)),)*
                }
            }
        }
    };
}

step_kinds! {
    /// A filesystem on a Cinder volume, made only when the device holds none.
    StorageFilesystem => "storage.filesystem", "storage_filesystem.sh";
    /// The volume mounted persistently (`/etc/fstab` by UUID).
    StorageMount => "storage.mount", "storage_mount.sh";
    /// The NFS server installed and running.
    NfsServer => "nfs.server", "nfs_server.sh";
    /// The instance's block of `/etc/exports`, exported.
    NfsExports => "nfs.exports", "nfs_exports.sh";
    /// The NFS client installed on a Kubernetes node.
    NfsClient => "nfs.client", "nfs_client.sh";
    /// The package's cluster install script run on a node not yet in a cluster.
    K8sInstall => "k8s.install", "k8s_install.sh";
    /// Fresh join material (bootstrap token, CA hash, certificate key) on a master.
    K8sJoinMaterial => "k8s.join_material", "k8s_join_material.sh";
    /// A node's `/etc/hosts` block of the cluster's nodes (`master<n>`, `worker<n>`).
    K8sHosts => "k8s.hosts", "hosts_block.sh";
    /// A node drained and deleted from the cluster, run on a master.
    K8sRemoveNode => "k8s.remove_node", "k8s_remove_node.sh";
    /// A leaving master's stacked etcd member removed, run on a live master.
    K8sEtcdRemoveMember => "k8s.etcd_remove_member", "k8s_etcd_remove_member.sh";
    /// A master's HAProxy backend of the API servers lists every master's address, reloaded.
    K8sHaproxyBackends => "k8s.haproxy_backends", "k8s_haproxy_backends.sh";
    /// A PersistentVolume registered from its manifest, run on a master.
    PvRegister => "pv.register", "pv_register.sh";
    /// A PersistentVolume's phase Available or Bound.
    PvAvailable => "pv.available", "pv_available.sh";
    /// None of the PersistentVolumes Bound (refuses otherwise).
    PvNotBound => "pv.not_bound", "pv_not_bound.sh";
    /// A PersistentVolume deleted (never a Bound one).
    PvUnregister => "pv.unregister", "pv_unregister.sh";
    /// A node answers SSH from the Ansible server.
    NodeReach => "node.reach", "node_reach.sh";
    /// kubespray's inventory written on the Ansible server.
    AnsibleInventory => "ansible.inventory", "ansible_inventory.sh";
    /// An `ansible-playbook` run of kubespray on the Ansible server.
    AnsiblePlaybook => "ansible.playbook", "ansible_playbook.sh";
    /// The instance's inventory removed from the Ansible server.
    AnsibleForget => "ansible.forget", "ansible_forget.sh";
    /// A group variables file of the inventory.
    AnsibleGroupVars => "ansible.group_vars", "ansible_group_vars.sh";
    /// The MTU of a node's NIC observed.
    NodeNicMtu => "node.nic_mtu", "node_nic_mtu.sh";
    /// A node drained, run on a master.
    K8sDrain => "k8s.drain", "k8s_drain.sh";
    /// The package's external load balancer script run on the LB.
    LbScript => "lb.script", "lb_script.sh";
    /// vnfkeeper's HAProxy configuration on the LB.
    LbHaproxy => "lb.haproxy", "lb_haproxy.sh";
    /// The cluster's admin kubeconfig read on a master.
    K8sKubeconfig => "k8s.kubeconfig", "k8s_kubeconfig.sh";
    /// The bearer token of the cluster's admin ServiceAccount (made once), read on a master:
    /// what the cluster is registered with as a Kubernetes VIM.
    K8sVimToken => "k8s.vim_token", "k8s_vim_token.sh";
    /// The container runtime of the registry VM installed.
    RegistryRuntime => "registry.runtime", "registry_runtime.sh";
    /// The registry image present (loaded or pulled).
    RegistryImage => "registry.image", "registry_image.sh";
    /// The registry container running with its port and data directory.
    RegistryRun => "registry.run", "registry_run.sh";
    /// The registry answering `GET /v2/`.
    RegistryReady => "registry.ready", "registry_ready.sh";
    /// A node's Docker `daemon.json` observed (changes nothing).
    TrustObserve => "trust.observe", "trust_observe.sh";
    /// Docker's `insecure-registries` of a node.
    TrustDocker => "trust.docker", "trust_docker.sh";
    /// A node's registry CA files.
    TrustFiles => "trust.files", "trust_files.sh";
    /// A node's `/etc/hosts` block of registry names.
    TrustHosts => "trust.hosts", "hosts_block.sh";
    /// A node's registry credentials.
    TrustAuth => "trust.auth", "trust_auth.sh";
}

/// How the engine reads what a step's apply printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputUse {
    /// The last line is the step's verdict; the output is recorded when the step fails.
    Verdict,
    /// The output is long-running progress: an `ansible-playbook` run's JSON-lines events
    /// ([`crate::ansible`]), read and journaled line by line as they arrive (secrets masked),
    /// then judged by the flavour ([`crate::flavour::MgmtDriver::judge_apply`]).
    Streamed,
}

impl StepKind {
    /// The kind stored as `name`, if there is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.name() == name)
    }

    /// How the engine reads the step's apply output.
    pub fn output_use(self) -> OutputUse {
        match self {
            StepKind::AnsiblePlaybook => OutputUse::Streamed,
            _ => OutputUse::Verdict,
        }
    }

    /// Whether a node's step of this kind makes it trust private registries: when it ends DONE,
    /// the engine records the registries the flavour names (`MgmtDriver::registries`), and a
    /// VNFC whose probes of this kind are all in place counts as trust-verified.
    pub fn records_trust(self) -> bool {
        matches!(
            self,
            StepKind::TrustObserve
                | StepKind::TrustDocker
                | StepKind::TrustFiles
                | StepKind::TrustHosts
                | StepKind::TrustAuth
        )
    }

    /// Whether a reconcile probe of a step of this kind is about one object named by the step's
    /// first argument (a PersistentVolume), so that its finding is keyed `name:object`.
    pub fn probes_object(self) -> bool {
        matches!(self, StepKind::PvRegister)
    }

    /// The kind a reconcile finding's check (`name` or `name:object`, see
    /// [`crate::recipes::Step::probe_check`]) is about, if it names a step.
    pub fn of_check(check: &str) -> Option<Self> {
        Self::parse(check.split_once(':').map_or(check, |(name, _)| name))
    }
}

impl serde::Serialize for StepKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for StepKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = <String as serde::Deserialize>::deserialize(d)?;
        Self::parse(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown step `{name}`")))
    }
}

impl std::fmt::Display for StepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
