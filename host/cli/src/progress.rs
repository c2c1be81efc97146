//! Apply progress for the human: a bar on a terminal, plain lines otherwise (and always when
//! the cluster's output is buffered, see [`Sink`]).

use std::io::IsTerminal as _;
use std::time::Duration;

use proxops_reconcile::{Event, Reporter};

use crate::output;
use crate::render;
use crate::sink::Sink;

/// Progress: a bar on a terminal, plain lines otherwise.
pub(crate) struct Progress {
    pub(crate) bar: Option<indicatif::ProgressBar>,
    sink: Sink,
    /// The status page's live view of this apply (`watch --ui-listen`).
    live: Option<crate::ui::Live>,
}

impl Progress {
    pub(crate) fn new(actions: usize, sink: Sink, live: Option<crate::ui::Live>) -> Progress {
        let bar = (sink.is_live() && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(actions as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{bar:30}] {pos}/{len} {wide_msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress { bar, sink, live }
    }
}

impl Reporter for Progress {
    fn event(&self, event: Event) {
        let line = match &event {
            Event::Pass { pass, actions } => {
                format!(
                    "pass {pass}: {}",
                    render::count(*actions, "action", "actions")
                )
            }
            Event::ActionStarted { object, summary } => {
                format!("… {}: {}", render::who(&object.id), output::inline(summary))
            }
            Event::ActionDone {
                object,
                summary,
                error: None,
            } => format!("✓ {}: {}", render::who(&object.id), output::inline(summary)),
            Event::ActionDone {
                object,
                summary,
                error: Some(e),
            } => format!(
                "✗ {}: {}: {}",
                render::who(&object.id),
                output::inline(summary),
                output::inline(e)
            ),
            Event::Warned {
                object,
                summary,
                warnings,
            } => format!(
                "! {}: {}: PVE warned: {}",
                render::who(&object.id),
                output::inline(summary),
                warnings
                    .iter()
                    .map(|w| output::inline(w).into_owned())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Event::Stale { object, summary } => format!(
                "↻ {}: {}: the config changed since it was read; planned again",
                render::who(&object.id),
                output::inline(summary)
            ),
            Event::Waiting {
                object,
                summary,
                what,
            } if summary.starts_with("health gate") => format!(
                "… {}: {}: waiting for {}",
                render::who(&object.id),
                output::inline(summary),
                output::inline(what)
            ),
            Event::Waiting {
                object,
                summary,
                what,
            } => format!(
                "… {}: {}: PVE's HA manager carries it out; waiting for {}",
                render::who(&object.id),
                output::inline(summary),
                output::inline(what)
            ),
            Event::Held {
                object,
                summary,
                budget,
            } => format!(
                "⏸ {}: {}: not started: disruption budget {} halted",
                render::who(&object.id),
                output::inline(summary),
                output::inline(budget)
            ),
            Event::Halted { object, halt } => format!(
                "✗ {}: {}",
                render::who(&object.id),
                output::inline(&halt.to_string())
            ),
            Event::Blocked { object, by } => format!(
                "✗ {}: not attempted: {} did not converge",
                render::who(&object.id),
                output::inline(&by.to_string())
            ),
        };
        if let Some(live) = &self.live {
            live.line(&line);
        }
        match &self.bar {
            Some(bar) => {
                if let Event::Pass { actions, .. } = event {
                    bar.set_length(actions as u64);
                    bar.set_position(0);
                }
                if matches!(event, Event::ActionDone { .. }) {
                    bar.inc(1);
                }
                if matches!(event, Event::ActionStarted { .. }) {
                    bar.set_message(output::clean(&line));
                } else {
                    bar.println(output::clean(&line));
                }
            }
            None => {
                if !matches!(event, Event::ActionStarted { .. }) {
                    self.sink.outln(format!("  {line}"));
                }
            }
        }
    }
}
