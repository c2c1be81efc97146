//! Seeded, reproducible fault injection: rules matched per endpoint that add latency, answer 5xx, reset connections,
//! lose answers or fail tasks; and [`FaultPlan`], the compact rate form of `proxops sim serve --faults`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// What a matching rule does.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum FaultKind {
    /// Delay the answer by `ms` milliseconds (combines with the other kinds).
    Latency { ms: u64 },
    /// Answer with this status and message instead of running the handler.
    Status { code: u16, message: String },
    /// Close the connection without any response; the request is not run.
    Reset,
    /// Run the request, then close the connection without its answer: the change lands but the
    /// client cannot know (a proxy or network failure after PVE acted).
    LoseAnswer,
    /// Let the request start its task, then fail the task with this message (async endpoints only).
    /// On `POST /nodes/{node}/qemu/{vmid}/status/start` it also fails the start of a create with
    /// `start=1` (a warning in the create's task; the VM is created stopped), as in PVE.
    FailTask { message: String },
    /// PVE's per-VM flock timeout: a 500 on sync endpoints, a failed task on async ones.
    LockTimeout,
}

fn star() -> String {
    "*".to_string()
}

/// One fault rule. JSON: `{"method":"POST","path":"/nodes/{node}/qemu","kind":{"type":"fail-task","message":"boom"},"times":1}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FaultRule {
    /// HTTP method or `*`.
    #[serde(default = "star")]
    pub method: String,
    /// Path template below /api2/json (`/nodes/{node}/qemu/{vmid}/config`) or `*`.
    #[serde(default = "star")]
    pub path: String,
    pub kind: FaultKind,
    /// Chance in [0, 1] that a matching request triggers the rule (seeded RNG).
    #[serde(default)]
    pub probability: Option<f64>,
    /// Trigger on the first N matching requests only.
    #[serde(default)]
    pub times: Option<u32>,
}

/// The faults one request has drawn.
#[derive(Debug, Default, Clone)]
pub(crate) struct Drawn {
    pub latency_ms: u64,
    pub status: Option<(u16, String)>,
    pub reset: bool,
    pub lose_answer: bool,
    pub fail_task: Option<String>,
    pub lock_timeout: bool,
}

/// Rules plus the seeded RNG and per-rule trigger counts.
pub(crate) struct FaultEngine {
    rules: Vec<(FaultRule, u32)>,
    rng: ChaCha8Rng,
}

impl FaultEngine {
    pub(crate) fn new(rules: Vec<FaultRule>, seed: u64) -> FaultEngine {
        FaultEngine {
            rules: rules.into_iter().map(|r| (r, 0)).collect(),
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_fa17),
        }
    }

    pub(crate) fn set(&mut self, rules: Vec<FaultRule>) {
        self.rules = rules.into_iter().map(|r| (r, 0)).collect();
    }

    pub(crate) fn rules(&self) -> Vec<FaultRule> {
        self.rules.iter().map(|(r, _)| r.clone()).collect()
    }

    /// Draws the faults for one request to `method template`.
    pub(crate) fn draw(&mut self, method: &str, template: &str) -> Drawn {
        let mut d = Drawn::default();
        for (rule, fired) in self.rules.iter_mut() {
            if rule.method != "*" && !rule.method.eq_ignore_ascii_case(method) {
                continue;
            }
            if rule.path != "*" && rule.path != template {
                continue;
            }
            if let Some(times) = rule.times
                && *fired >= times
            {
                continue;
            }
            if let Some(p) = rule.probability {
                let x: f64 = self.rng.random();
                if x >= p {
                    continue;
                }
            }
            *fired += 1;
            match &rule.kind {
                FaultKind::Latency { ms } => d.latency_ms += ms,
                FaultKind::Status { code, message } => {
                    if d.status.is_none() && !d.reset {
                        d.status = Some((*code, message.clone()));
                    }
                }
                FaultKind::Reset => {
                    if d.status.is_none() {
                        d.reset = true;
                    }
                }
                FaultKind::LoseAnswer => d.lose_answer = true,
                FaultKind::FailTask { message } => {
                    if d.fail_task.is_none() {
                        d.fail_task = Some(message.clone());
                    }
                }
                FaultKind::LockTimeout => d.lock_timeout = true,
            }
        }
        d
    }
}

/// The message of a task failed by a `task-fail` rate.
pub const INJECTED_TASK_FAILURE: &str = "simulated task failure (fault injection)";

/// A seeded set of fault rates, parsed from `seed=N,http503=P,http596=P,reset=P,lost=P,task-fail=P,lock-timeout=P`
/// (each `P` a chance in [0, 1] per request, every key optional): `http503`/`http596` answer that status without
/// running the request (596 is pveproxy's "connection timed out" to its backend), `reset` closes the connection
/// without running it, `lost` runs it and then closes the connection (the change lands, the answer is lost),
/// `task-fail` fails an async request's task, `lock-timeout` fails it with PVE's config-lock timeout.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultPlan {
    pub seed: Option<u64>,
    pub rules: Vec<FaultRule>,
}

/// An invalid `--faults` text.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct FaultPlanError(String);

impl FaultPlan {
    /// Parses the compact form; see [`FaultPlan`].
    pub fn parse(text: &str) -> Result<FaultPlan, FaultPlanError> {
        let mut plan = FaultPlan::default();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| FaultPlanError(format!("'{item}' is not KEY=VALUE")))?;
            let (key, value) = (key.trim(), value.trim());
            if key == "seed" {
                let seed = value
                    .parse()
                    .map_err(|_| FaultPlanError(format!("seed '{value}' is not a number")))?;
                plan.seed = Some(seed);
                continue;
            }
            let p: f64 = value
                .parse()
                .ok()
                .filter(|p: &f64| (0.0..=1.0).contains(p))
                .ok_or_else(|| {
                    FaultPlanError(format!("{key}: '{value}' is not a chance in [0, 1]"))
                })?;
            let kind = match key {
                "http503" => FaultKind::Status {
                    code: 503,
                    message: "Service Unavailable".into(),
                },
                "http596" => FaultKind::Status {
                    code: 596,
                    message: "Connection timed out".into(),
                },
                "reset" => FaultKind::Reset,
                "lost" => FaultKind::LoseAnswer,
                "task-fail" => FaultKind::FailTask {
                    message: INJECTED_TASK_FAILURE.into(),
                },
                "lock-timeout" => FaultKind::LockTimeout,
                other => {
                    return Err(FaultPlanError(format!(
                        "unknown fault '{other}' (seed, http503, http596, reset, lost, task-fail, lock-timeout)"
                    )));
                }
            };
            if plan.rules.iter().any(|r| r.kind == kind) {
                return Err(FaultPlanError(format!("{key} is given twice")));
            }
            plan.rules.push(FaultRule {
                method: star(),
                path: star(),
                kind,
                probability: Some(p),
                times: None,
            });
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod plan_tests {
    use super::*;

    #[test]
    fn the_compact_form_becomes_one_rule_per_rate() {
        let plan = FaultPlan::parse(
            "seed=7, http503=0.1,http596=0.05,reset=0.05,lost=0.02,task-fail=0.05,lock-timeout=0.01",
        )
        .unwrap();
        assert_eq!(plan.seed, Some(7));
        let rates: Vec<(FaultKind, Option<f64>)> = plan
            .rules
            .iter()
            .map(|r| (r.kind.clone(), r.probability))
            .collect();
        assert_eq!(rates.len(), 6);
        assert_eq!(rates[2], (FaultKind::Reset, Some(0.05)));
        assert_eq!(rates[3], (FaultKind::LoseAnswer, Some(0.02)));
        assert!(plan.rules.iter().all(|r| r.method == "*" && r.path == "*"));
        assert_eq!(FaultPlan::parse("").unwrap(), FaultPlan::default());
    }

    #[test]
    fn bad_texts_are_refused_with_the_key() {
        for (text, says) in [
            ("http503", "not KEY=VALUE"),
            ("http503=1.5", "http503: '1.5'"),
            ("http503=-0.1", "http503: '-0.1'"),
            ("reset=x", "reset: 'x'"),
            ("seed=abc", "seed 'abc'"),
            ("http500=0.1", "unknown fault 'http500'"),
            ("reset=0.1,reset=0.2", "reset is given twice"),
        ] {
            let e = FaultPlan::parse(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn a_lost_answer_is_drawn_with_its_rate() {
        let plan = FaultPlan::parse("lost=1").unwrap();
        let mut engine = FaultEngine::new(plan.rules, 1);
        assert!(engine.draw("POST", "/nodes/{node}/qemu").lose_answer);
        let mut none = FaultEngine::new(FaultPlan::parse("lost=0").unwrap().rules, 1);
        assert!(!none.draw("POST", "/nodes/{node}/qemu").lose_answer);
    }
}
