//! The validation pipeline of a run over many clusters (`proxops_reconcile::validate_in_order`,
//! what `plan` and `apply` use): a cluster's inputs are ready while the next cluster is still
//! being validated, so its planning can start; and a cluster whose validation fails (here:
//! panics) fails alone. In-process, with the bundled kinds and the VM kind's calls served by
//! a native stand-in that can hold a cluster's validation back.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proxops_reconcile::{ClusterInputs, KindRegistry, Secrets};
use proxops_runtime::calls::{KindCalls, NativeKind};
use proxops_runtime::kind::{
    Action, Adopted, Call, Diagnostic, ObjectKey, Observation, Proposal, Reference, Resolved,
    Validated,
};
use proxops_runtime::{GuestError, SecretSource};

/// What the stand-in does when it validates a manifest whose name starts with a prefix.
#[derive(Clone)]
enum OnValidate {
    /// Wait until the sender is dropped (or sends).
    Hold(Arc<Mutex<mpsc::Receiver<()>>>),
    Panic,
}

/// A VM kind that validates every manifest into its own JSON, with the name as identity,
/// except that manifests named `<prefix>…` do what `on` says first.
#[derive(Clone)]
struct StandIn {
    prefix: &'static str,
    on: OnValidate,
}

impl NativeKind for StandIn {
    fn instance(&self) -> Box<dyn KindCalls> {
        Box::new(self.clone())
    }
}

fn name_of(json: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(json).expect("JSON");
    v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

impl KindCalls for StandIn {
    fn set_secrets(&mut self, _: Option<Arc<dyn SecretSource>>) {}
    fn validate(
        &mut self,
        manifest: &str,
    ) -> Result<Result<Validated, Vec<Diagnostic>>, GuestError> {
        if name_of(manifest).starts_with(self.prefix) {
            match &self.on {
                OnValidate::Hold(released) => {
                    let _ = released.lock().unwrap().recv();
                }
                OnValidate::Panic => panic!("the stand-in kind fails on purpose"),
            }
        }
        Ok(Ok(Validated {
            desired: manifest.to_string(),
            warnings: Vec::new(),
        }))
    }
    fn references(&mut self, _: &str) -> Result<Vec<Reference>, GuestError> {
        Ok(Vec::new())
    }
    fn check_references(&mut self, _: &str, _: &[Resolved]) -> Result<Vec<Diagnostic>, GuestError> {
        Ok(Vec::new())
    }
    fn identity(&mut self, desired: &str) -> Result<ObjectKey, GuestError> {
        Ok(ObjectKey {
            node: None,
            space: "stand-in".into(),
            key: name_of(desired),
            resource_id: None,
        })
    }
    fn observe(
        &mut self,
        _: Option<&str>,
        _: Option<&str>,
        _: &[Resolved],
        _: &[Resolved],
    ) -> Result<Vec<Call>, GuestError> {
        Ok(Vec::new())
    }
    fn plan(
        &mut self,
        _: Option<&str>,
        _: &[Resolved],
        _: &[Resolved],
        _: &Observation,
    ) -> Result<Result<Proposal, Vec<Diagnostic>>, GuestError> {
        Ok(Ok(Proposal {
            actions: Vec::new(),
            drift: Vec::new(),
            pending: Vec::new(),
            anomalies: Vec::new(),
        }))
    }
    fn claims(&mut self, _: &str, _: &str) -> Result<bool, GuestError> {
        Ok(false)
    }
    fn finally(&mut self, _: &[String]) -> Result<Vec<Action>, GuestError> {
        Ok(Vec::new())
    }
    fn adopt(&mut self, _: &Observation) -> Result<Result<Adopted, String>, GuestError> {
        Ok(Err("the stand-in adopts nothing".into()))
    }
}

/// A repository with clusters `a` and `b`, three VM manifests each (`a-0`…, `b-0`…).
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for cluster in ["a", "b"] {
        let clusters = dir.path().join("clusters");
        std::fs::create_dir_all(&clusters).unwrap();
        std::fs::write(
            clusters.join(format!("{cluster}.yaml")),
            format!(
                "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: {cluster}}}\nspec:\n  endpoint: 'sim:'\n"
            ),
        )
        .unwrap();
        let vms = dir.path().join("vm").join(cluster);
        std::fs::create_dir_all(&vms).unwrap();
        for i in 0..3 {
            std::fs::write(
                vms.join(format!("{cluster}-{i}.yaml")),
                format!(
                    "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {{name: {cluster}-{i}}}\nspec: {{node: pve01}}\n"
                ),
            )
            .unwrap();
        }
    }
    dir
}

/// Validate clusters `a` then `b` of `repo` with the VM kind served by `stand_in`.
fn validating(
    repo: &tempfile::TempDir,
    stand_in: StandIn,
) -> Vec<tokio::sync::oneshot::Receiver<ClusterInputs>> {
    let runtime = proxops_runtime::Runtime::new(proxops_runtime::RuntimeConfig {
        cache_dir: Some(crate::support::shared_cache()),
    })
    .expect("runtime");
    let mut registry = KindRegistry::bundled(&runtime).expect("bundled kinds");
    assert!(registry.register_native("VM", Arc::new(stand_in)));
    let folders = registry.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let (layout, diags) = proxops_core::load_layout(repo.path(), repo.path(), &folders);
    assert!(diags.is_empty(), "{diags:?}");
    let layout = Arc::new(layout.expect("the repository opens"));
    proxops_reconcile::validate_in_order(
        registry,
        Secrets::default(),
        vec![(layout.clone(), "a".into()), (layout, "b".into())],
        None,
    )
}

/// The names of a cluster's validated objects.
fn names(inputs: &ClusterInputs) -> Vec<String> {
    inputs.objects.iter().map(|o| o.id.name.clone()).collect()
}

#[tokio::test]
async fn a_cluster_is_ready_while_the_next_is_still_validated() {
    let repo = repo();
    let (release, held) = mpsc::channel();
    let mut rx = validating(
        &repo,
        StandIn {
            prefix: "b-",
            on: OnValidate::Hold(Arc::new(Mutex::new(held))),
        },
    )
    .into_iter();
    let (a, mut b) = (rx.next().unwrap(), rx.next().unwrap());
    // `a` arrives although `b`'s validation is held back: planning `a` need not wait.
    let a = tokio::time::timeout(Duration::from_secs(30), a)
        .await
        .expect("cluster a is ready while b is still being validated")
        .expect("cluster a validated");
    assert_eq!(names(&a), ["a-0", "a-1", "a-2"]);
    assert!(a.diags.is_empty(), "{:?}", a.diags);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        matches!(
            b.try_recv(),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty)
        ),
        "b is not ready while its validation is held"
    );
    drop(release);
    let b = tokio::time::timeout(Duration::from_secs(30), b)
        .await
        .expect("cluster b is ready once released")
        .expect("cluster b validated");
    assert_eq!(names(&b), ["b-0", "b-1", "b-2"]);
}

#[tokio::test]
async fn a_cluster_whose_validation_panics_fails_alone() {
    let repo = repo();
    let mut rx = validating(
        &repo,
        StandIn {
            prefix: "a-",
            on: OnValidate::Panic,
        },
    )
    .into_iter();
    let (a, b) = (rx.next().unwrap(), rx.next().unwrap());
    let a = tokio::time::timeout(Duration::from_secs(30), a)
        .await
        .expect("cluster a's receiver answers");
    assert!(a.is_err(), "a's validation panicked: no inputs");
    let b = tokio::time::timeout(Duration::from_secs(30), b)
        .await
        .expect("cluster b's receiver answers")
        .expect("cluster b is validated after a failed");
    assert_eq!(names(&b), ["b-0", "b-1", "b-2"]);
}
