//! [`SitePolicy`]: a policy written as typed settings and plain rule functions. The SDK
//! implements the WIT `Guest` for it (settings parsed on every call, fail-closed when they do
//! not parse), so a policy crate holds only its rules and one `export_policy!` line.

use serde::de::DeserializeOwned;

use crate::findings::Findings;
use crate::settings::parse_settings;
use crate::types::Diagnostic;
use crate::wit::{ActionView, Guest, ManifestView, PolicyInfo, Verdict};

/// A site policy over typed settings.
///
/// ```
/// use proxops_policy_sdk::wit::{Guest, ManifestView, Verdict};
/// use proxops_policy_sdk::{Doc, Findings, SitePolicy};
///
/// #[derive(serde::Deserialize, Default)]
/// #[serde(default)]
/// pub struct Settings {
///     label: Option<String>,
/// }
///
/// pub struct Policy;
/// impl SitePolicy for Policy {
///     type Settings = Settings;
///     const NAME: &'static str = "require-owner";
///     const VERSION: &'static str = "0.1.0";
///     const DESCRIPTION: &'static str = "every VM names its owner";
///     const SCHEMA: &'static str = r#"{"type": "object", "properties": {"label": {"type": "string"}}}"#;
///     fn check_manifest(settings: &Settings, manifest: &ManifestView) -> Verdict {
///         let label = settings.label.as_deref().unwrap_or("owner");
///         let mut f = Findings::new();
///         if Doc::parse(&manifest.document).label(label).is_none() {
///             f.deny(format!("metadata.labels.{label}"), format!("name the VM's {label}"));
///         }
///         f.verdict()
///     }
/// }
/// #[cfg(target_arch = "wasm32")]
/// proxops_policy_sdk::export_policy!(Policy);
///
/// let vm = |document: &str| ManifestView {
///     cluster: "lab".into(),
///     kind: "VM".into(),
///     name: "web".into(),
///     document: document.into(),
/// };
/// let unowned = vm(r#"{"kind": "VM", "metadata": {"name": "web"}}"#);
/// let owned = vm(r#"{"kind": "VM", "metadata": {"name": "web", "labels": {"team": "db"}}}"#);
/// let settings = r#"{"label": "team"}"#.to_string();
/// assert!(matches!(<Policy as Guest>::check_manifest(unowned, settings.clone()), Verdict::Deny(_)));
/// assert!(matches!(<Policy as Guest>::check_manifest(owned, settings), Verdict::Allow));
/// ```
pub trait SitePolicy {
    /// The `settings:` mapping of `proxops.yaml` (`{}` when absent).
    type Settings: DeserializeOwned;
    const NAME: &'static str;
    const VERSION: &'static str;
    const DESCRIPTION: &'static str;
    /// JSON Schema of the settings; the host checks settings against it before
    /// [`SitePolicy::validate_settings`].
    const SCHEMA: &'static str;

    /// Checks serde and the schema cannot express; the default accepts.
    fn validate_settings(_settings: &Self::Settings) -> Result<(), Vec<Diagnostic>> {
        Ok(())
    }

    /// The rule over one manifest; the default allows.
    fn check_manifest(_settings: &Self::Settings, _manifest: &ManifestView) -> Verdict {
        Verdict::Allow
    }

    /// The rule over a cluster's planned actions; the default allows.
    fn check_plan(_settings: &Self::Settings, _actions: &[ActionView]) -> Verdict {
        Verdict::Allow
    }
}

/// Settings are validated when the policy loads; should they still not parse at a check,
/// the check denies rather than allowing unchecked.
fn settings_denied(errors: Vec<Diagnostic>) -> Verdict {
    let mut f = Findings::new();
    for e in errors {
        f.deny(e.path, e.message);
    }
    f.verdict()
}

impl<P: SitePolicy> Guest for P {
    fn metadata() -> PolicyInfo {
        PolicyInfo {
            name: P::NAME.into(),
            version: P::VERSION.into(),
            settings_schema: P::SCHEMA.into(),
            description: P::DESCRIPTION.into(),
        }
    }

    fn validate_settings(settings: String) -> Result<(), Vec<Diagnostic>> {
        P::validate_settings(&parse_settings(&settings)?)
    }

    fn check_manifest(manifest: ManifestView, settings: String) -> Verdict {
        match parse_settings(&settings) {
            Ok(s) => P::check_manifest(&s, &manifest),
            Err(e) => settings_denied(e),
        }
    }

    fn check_plan(actions: Vec<ActionView>, settings: String) -> Verdict {
        match parse_settings(&settings) {
            Ok(s) => P::check_plan(&s, &actions),
            Err(e) => settings_denied(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Settings {
        #[serde(default)]
        deny: bool,
    }

    struct Toy;

    impl SitePolicy for Toy {
        type Settings = Settings;
        const NAME: &'static str = "toy";
        const VERSION: &'static str = "1.0.0";
        const DESCRIPTION: &'static str = "denies when told to";
        const SCHEMA: &'static str = "{}";

        fn check_manifest(settings: &Settings, manifest: &ManifestView) -> Verdict {
            let mut f = Findings::new();
            if settings.deny {
                f.deny("spec", format!("{} denied", manifest.name));
            }
            f.verdict()
        }
    }

    fn manifest() -> ManifestView {
        ManifestView {
            cluster: "lab".into(),
            kind: "VM".into(),
            name: "web".into(),
            document: "{}".into(),
        }
    }

    /// (settings JSON, manifest check denies?, plan check denies?)
    #[test]
    fn the_guest_parses_settings_and_fails_closed() {
        let check = |settings: &str, manifest_denied: bool, plan_denied: bool| {
            let m = <Toy as Guest>::check_manifest(manifest(), settings.into());
            let p = <Toy as Guest>::check_plan(Vec::new(), settings.into());
            assert_eq!(matches!(m, Verdict::Deny(_)), manifest_denied, "{settings}");
            assert_eq!(matches!(p, Verdict::Deny(_)), plan_denied, "{settings}");
        };
        check("", false, false);
        check(r#"{"deny": false}"#, false, false);
        check(r#"{"deny": true}"#, true, false);
        check(r#"{"deny": "yes"}"#, true, true);
        check(r#"{"unknown": 1}"#, true, true);
    }

    #[test]
    fn metadata_and_settings_validation() {
        let info = <Toy as Guest>::metadata();
        assert_eq!(
            (info.name.as_str(), info.version.as_str()),
            ("toy", "1.0.0")
        );
        assert!(<Toy as Guest>::validate_settings("{}".into()).is_ok());
        let errors = <Toy as Guest>::validate_settings(r#"{"deny": 3}"#.into()).unwrap_err();
        assert!(errors[0].message.contains("invalid settings"), "{errors:?}");
    }
}
