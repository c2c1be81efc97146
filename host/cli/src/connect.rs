//! Reaching a cluster: the embedded simulator for `sim:`, or a real endpoint with its token
//! and TLS trust settings from the cluster file.
//!
//! The CA file is read through the rooted directory of the folder the cluster file came from
//! (`config`: the repository, or the `--trusted-config` folder). The endpoint was checked when
//! the cluster file was parsed: it carries no credentials, so it is printed as it is.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::output::errln;
use proxops_core::{ClusterFile, Endpoint, SecretSource, Tls};
use proxops_pve::{Client, ClientConfig, TlsMode};

/// A client, and the embedded simulator it talks to when the endpoint is `sim:`.
pub struct Connection {
    pub client: Client,
    /// Kept alive for the duration of the command (dropping it stops the simulator).
    #[allow(dead_code)]
    pub sim: Option<proxops_sim::Simulator>,
    /// `sim: (state in …)` or the URL, for headers.
    pub label: String,
}

pub async fn connect(
    repo: &Path,
    config: &Path,
    cluster: &ClusterFile,
    sops: Option<&crate::secrets::LazySops>,
) -> anyhow::Result<Connection> {
    let timeout = Duration::from_secs(60);
    match &cluster.endpoint {
        Endpoint::Sim => {
            let dir = repo.join(".proxops");
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let state = dir.join(format!("sim-{}.json", cluster.name));
            let config = proxops_sim::SimConfig {
                nodes: cluster.sim_nodes.clone(),
                volumes: cluster
                    .sim_volumes
                    .iter()
                    .map(|v| proxops_sim::VolumeSeed::new(v))
                    .collect(),
                state_file: Some(state.clone()),
                ..proxops_sim::SimConfig::default()
            };
            let sim = proxops_sim::start(config)
                .await
                .context("starting the embedded simulator")?;
            let (id, secret) = sim.token().split_once('=').context("simulator token")?;
            let client = Client::new(ClientConfig {
                base_url: sim.base_url(),
                token_id: id.to_string(),
                token_secret: secret.to_string(),
                tls: TlsMode::Fingerprint(sim.fingerprint().context("simulator fingerprint")?),
                timeout,
            })?;
            let label = format!(
                "sim: (state in {})",
                state.strip_prefix(repo).unwrap_or(&state).display()
            );
            Ok(Connection {
                client,
                sim: Some(sim),
                label,
            })
        }
        Endpoint::Https(url) | Endpoint::Http(url) => {
            if matches!(cluster.endpoint, Endpoint::Http(_)) {
                errln!(
                    "warning: {}: {url} is plain HTTP; the API token crosses the network unencrypted",
                    cluster.file
                );
            }
            let Some(token) = &cluster.token else {
                bail!("{}: spec.token is required for {url}", cluster.file)
            };
            let secret = match &token.secret {
                SecretSource::Env(var) => {
                    let value = std::env::var(var).map_err(|_| {
                        anyhow::anyhow!(
                            "{}: spec.token.secret: environment variable {var} is not set",
                            cluster.file
                        )
                    })?;
                    // Registered for redaction before anything can print it; too short refused.
                    proxops_core::text::register(&value).map_err(|e| {
                        anyhow::anyhow!(
                            "{}: spec.token.secret: environment variable {var}: {e}",
                            cluster.file
                        )
                    })?;
                    value
                }
                SecretSource::Sops(path) => sops
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "{}: spec.token.secret: no SOPS file for this cluster",
                            cluster.file
                        )
                    })?
                    .lookup(path)
                    .map_err(|e| anyhow::anyhow!("{}: spec.token.secret: {e}", cluster.file))?,
            };
            let tls = match &cluster.tls {
                Tls::System => TlsMode::System,
                Tls::CaFile(file) => {
                    let pem = proxops_core::RepoDir::open(config)
                        .map_err(anyhow::Error::from)
                        .and_then(|dir| {
                            dir.read(file, proxops_core::repo::MAX_CA_BYTES)
                                .map_err(anyhow::Error::from)
                        })
                        .with_context(|| format!("{}: spec.tls.ca-file", cluster.file))?;
                    TlsMode::CaPem(pem)
                }
                Tls::Fingerprint(fp) => TlsMode::Fingerprint(fp.clone()),
                Tls::Insecure => {
                    errln!(
                        "warning: {}: spec.tls.insecure: the server certificate is not checked",
                        cluster.file
                    );
                    TlsMode::Insecure
                }
            };
            let client = Client::new(ClientConfig {
                base_url: url.clone(),
                token_id: token.id.clone(),
                token_secret: secret,
                tls,
                timeout,
            })?;
            Ok(Connection {
                client,
                sim: None,
                label: url.clone(),
            })
        }
    }
}
