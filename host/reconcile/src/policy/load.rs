//! Loading: reading each policy inside the repository, the pin check before compiling, the settings schema and `validate-settings`.

use std::path::Path;

use proxops_core::Diagnostic;
use proxops_core::settings::{
    Mode, PolicyEntry, RepoSettings, Scope, read_pinned_file, sha256_hex,
};
use proxops_runtime::{Limits, PolicyComponent, Runtime};
use serde_json::Value;

use super::{PolicySet, schema};

/// Where settings diagnostics point when a policy is loaded outside `proxops.yaml`.
const SETTINGS_FILE: &str = proxops_core::settings::FILE;

/// One loaded policy with its configuration.
#[derive(Debug, Clone)]
pub struct LoadedPolicy {
    /// Display name: `name:` from `proxops.yaml`, else the policy's own `metadata().name`.
    pub name: String,
    /// Path of the `.wasm` (relative to the repository for configured policies).
    pub file: String,
    pub mode: Mode,
    pub scope: Scope,
    /// The settings as JSON text, passed to every call.
    pub settings: String,
    pub(super) component: PolicyComponent,
}

impl LoadedPolicy {
    /// Load `wasm` as configured by `entry` and check its settings against the policy's
    /// schema, then with its `validate-settings`. `at` is the field path of the entry in
    /// `diag_file` (e.g. `policies[0]`), used to locate diagnostics; empty when `diag_file`
    /// holds the settings alone. The entry's `sha256` is not checked here:
    /// [`PolicySet::load`] does that before calling this, on the same bytes.
    pub fn from_wasm(
        runtime: &Runtime,
        wasm: &[u8],
        entry: &PolicyEntry,
        diag_file: &str,
        at: &str,
    ) -> Result<LoadedPolicy, Vec<Diagnostic>> {
        let file = entry.file.as_str();
        let settings = &entry.settings;
        // With no entry path (`policy test`), diagnostics point into the settings file itself.
        let field = |k: &str| {
            if at.is_empty() {
                String::new()
            } else {
                format!("{at}.{k}")
            }
        };
        let guest = file.rsplit('/').next().unwrap_or(file);
        let component = runtime
            .load_policy(guest, wasm, Limits::POLICY)
            .map_err(|e| {
                vec![Diagnostic::error(
                    diag_file,
                    field("file"),
                    format!("cannot load policy {file}: {e}"),
                )]
            })?;
        let info = component.info().clone();
        let settings_at = |p: &str| match (at.is_empty(), p.is_empty()) {
            (true, _) => p.to_string(),
            (false, true) => format!("{at}.settings"),
            (false, false) => format!("{at}.settings.{p}"),
        };
        let schema_text = info.settings_schema.trim();
        if !schema_text.is_empty() {
            let schema: Value = serde_json::from_str(schema_text).map_err(|e| {
                vec![Diagnostic::error(
                    diag_file,
                    field("file"),
                    format!(
                        "policy `{}` publishes a settings schema that is not JSON ({e}); fix the policy",
                        info.name
                    ),
                )]
            })?;
            let errors = schema::validate(&schema, settings);
            if !errors.is_empty() {
                return Err(errors
                    .into_iter()
                    .map(|(p, m)| {
                        Diagnostic::error(
                            diag_file,
                            settings_at(&p),
                            format!("{m} (settings schema of policy `{}`)", info.name),
                        )
                    })
                    .collect());
            }
        }
        let settings_text = settings.to_string();
        let verdict = component
            .instance()
            .and_then(|mut i| i.validate_settings(&settings_text));
        match verdict {
            Ok(Ok(())) => {}
            Ok(Err(diags)) => {
                // A rejection is a rejection, whatever severity its diagnostics carry.
                let mut errors: Vec<Diagnostic> = diags
                    .into_iter()
                    .map(|d| {
                        Diagnostic::error(
                            diag_file,
                            settings_at(&d.path),
                            format!("{} (policy `{}`)", d.message, info.name),
                        )
                    })
                    .collect();
                if errors.is_empty() {
                    errors.push(Diagnostic::error(
                        diag_file,
                        settings_at(""),
                        format!(
                            "policy `{}` rejected its settings without saying why",
                            info.name
                        ),
                    ));
                }
                return Err(errors);
            }
            Err(e) => {
                return Err(vec![Diagnostic::error(
                    diag_file,
                    field("settings"),
                    format!(
                        "policy `{}` failed while validating its settings: {e}",
                        info.name
                    ),
                )]);
            }
        }
        Ok(LoadedPolicy {
            name: info.name.clone(),
            file: file.to_string(),
            mode: entry.mode,
            scope: entry.scope.clone(),
            settings: settings_text,
            component,
        })
    }

    /// The policy's `metadata()` answer.
    pub fn info(&self) -> &proxops_runtime::policy::PolicyInfo {
        self.component.info()
    }

    /// SHA-256 of the loaded bytes.
    pub fn sha256(&self) -> &str {
        self.component.sha256()
    }
}

impl PolicySet {
    /// Load every policy of `settings` (from `proxops.yaml`), reading files inside
    /// `repo_root`. Any problem with any policy fails the whole load: run nothing with a
    /// policy set that is not the one configured.
    pub fn load(
        runtime: &Runtime,
        repo_root: &Path,
        settings: &RepoSettings,
    ) -> Result<PolicySet, Vec<Diagnostic>> {
        let file = settings.file.as_deref().unwrap_or(SETTINGS_FILE);
        let mut diags = Vec::new();
        let mut policies = Vec::new();
        for entry in &settings.policies {
            match load_entry(runtime, repo_root, file, entry) {
                Ok(p) => policies.push(p),
                Err(mut d) => diags.append(&mut d),
            }
        }
        if diags.is_empty() {
            Ok(PolicySet::from_policies(
                policies,
                settings.guest_budget.policy,
            ))
        } else {
            diags.sort();
            Err(diags)
        }
    }
}

fn load_entry(
    runtime: &Runtime,
    root: &Path,
    file: &str,
    entry: &PolicyEntry,
) -> Result<LoadedPolicy, Vec<Diagnostic>> {
    let at = entry.path();
    let wasm = read_pinned_file(root, &entry.file, &entry.sha256).map_err(|m| {
        vec![Diagnostic::error(
            file,
            format!("{at}.file"),
            format!("cannot read the policy: {m}"),
        )]
    })?;
    // The hash is checked before a single byte is compiled.
    let actual = sha256_hex(&wasm);
    if actual != entry.sha256 {
        return Err(vec![hash_mismatch(file, &at, entry, &actual)]);
    }
    let mut policy = LoadedPolicy::from_wasm(runtime, &wasm, entry, file, &at)?;
    // The runtime hashed the same bytes with the `sha2` crate: both must agree.
    if policy.sha256() != entry.sha256 {
        return Err(vec![hash_mismatch(file, &at, entry, policy.sha256())]);
    }
    if let Some(name) = &entry.name {
        policy.name = name.clone();
    }
    Ok(policy)
}

fn hash_mismatch(file: &str, at: &str, entry: &PolicyEntry, actual: &str) -> Diagnostic {
    Diagnostic::error(
        file,
        format!("{at}.sha256"),
        format!(
            "refused: {} has sha256 {actual}, but {file} pins {}; if the policy was rebuilt on purpose, update the pin",
            entry.file, entry.sha256
        ),
    )
}
