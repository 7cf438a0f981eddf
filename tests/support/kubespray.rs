//! Kubespray flavour helpers for the integration tests: the testbed's Ansible server in a
//! request.

use std::path::Path;

use serde_json::Value;
use testbed::hosts::AnsibleServer;

/// Fills the `additionalParams.k8s_cluster_installation_param.ansible` block of a kubespray
/// InstantiateVnfRequest (or of a spool envelope holding one) from the testbed's Ansible
/// server; see [`AnsibleServer::fill_request`] for the fields.
///
/// Errors: no `additionalParams.k8s_cluster_installation_param` object in the request.
pub fn fill_ansible(request: &mut Value, server: &AnsibleServer) -> anyhow::Result<()> {
    server.fill_request(request)
}

/// [`fill_ansible`] from the `ansible-server.json` the testbed wrote next to clouds.yaml
/// (`tb.ansible_server()` gives its path).
///
/// Errors: unreadable or malformed file; those of [`fill_ansible`].
pub fn fill_ansible_from_file(
    request: &mut Value,
    ansible_server_json: &Path,
) -> anyhow::Result<()> {
    fill_ansible(request, &AnsibleServer::read(ansible_server_json)?)
}
