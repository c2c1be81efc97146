//! The one way text leaves the process: every line proxops prints or logs passes through here,
//! where every registered secret is redacted in all its encodings and every control character
//! is escaped ([`proxops_core::text::clean`]).
//!
//! Drop-in replacements, for whole lines or whole texts (a text of several lines keeps its
//! newlines and tabs; every other control character, ESC and BEL above all, becomes visible as
//! `\u{1b}`):
//!
//! | instead of                                   | write                                     |
//! |----------------------------------------------|-------------------------------------------|
//! | `println!(…)`                                | `outln!(…)`                               |
//! | `print!(…)` (e.g. a rendered plan)           | `out!(…)`                                 |
//! | `eprintln!(…)`                               | `errln!(…)`                               |
//! | `println!("{}", to_string_pretty(&v)?)`      | `output::json(&v)?`                       |
//! | `bar.println(line)` / `bar.set_message(line)`| `bar.println(output::clean(&line))`       |
//! | a foreign value inside a line (`{msg}`)      | `{}` with `output::inline(&msg)`          |
//!
//! `inline` also escapes newline and tab: use it for one value of foreign origin (a guest's
//! message, a file name, PVE's text) inside a line of ours, so it cannot start a line of its
//! own (a fake `Apply complete`). Bring the macros in with `use crate::output::{outln, errln};`.
//!
//! Logs: [`init_tracing`] installs a subscriber whose field values are cleaned one by one and
//! whose whole lines are redacted again before they reach stderr ([`LogWriter`]), at every
//! level and for every crate, `PROXOPS_LOG=trace` included.
//!
//! Panics: [`install_panic_hook`] prints a panic's message cleaned as well.
//!
//! Write errors (a closed pipe) are ignored, as a reader that went away wants no more.

use std::borrow::Cow;
use std::io::Write as _;

use proxops_core::text;

/// `text` as it may leave the process: secrets redacted, control characters but newline and
/// tab escaped.
pub fn clean(text: &str) -> String {
    text::clean(text).into_owned()
}

/// One foreign value inside a line: secrets redacted, every control character escaped,
/// newline and tab included.
pub fn inline(text: &str) -> Cow<'_, str> {
    text::clean_inline(text)
}

/// Print `text` (cleaned) on stdout, as `print!` would.
pub fn out_text(text: &str) {
    let _ = std::io::stdout()
        .lock()
        .write_all(text::clean(text).as_bytes());
}

/// Print `line` (cleaned) and a newline on stdout, as `println!` would.
pub fn out_line(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text::clean(line).as_bytes());
    let _ = stdout.write_all(b"\n");
}

/// Print `line` (cleaned) and a newline on stderr, as `eprintln!` would.
pub fn err_line(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text::clean(line).as_bytes());
    let _ = stderr.write_all(b"\n");
}

/// Print `value` as pretty JSON on stdout, redacted. (serde_json already escapes control
/// characters inside strings; redaction sees the JSON-escaped forms of each secret.)
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    out_line(&text);
    Ok(())
}

/// `println!`, cleaned.
macro_rules! outln {
    () => { $crate::output::out_line("") };
    ($($arg:tt)*) => { $crate::output::out_line(&format!($($arg)*)) };
}

/// `print!`, cleaned.
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::out_text(&format!($($arg)*)) };
}

/// `eprintln!`, cleaned.
macro_rules! errln {
    () => { $crate::output::err_line("") };
    ($($arg:tt)*) => { $crate::output::err_line(&format!($($arg)*)) };
}

pub(crate) use {errln, out, outln};

/// The tracing writer: each event's formatted line is collected, redacted (and, without
/// colours, escaped) as a whole, then written to stderr in one piece.
#[derive(Debug, Clone, Copy)]
pub struct LogWriter {
    /// The formatter adds ANSI colour codes: keep ESC (the field values, the only foreign
    /// text, were escaped one by one by [`init_tracing`]'s field formatter).
    pub ansi: bool,
}

/// One event's line, written on drop.
#[derive(Debug)]
pub struct LogLine {
    buf: Vec<u8>,
    ansi: bool,
}

impl std::io::Write for LogLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let raw = String::from_utf8_lossy(&self.buf);
        let shown = if self.ansi {
            text::redact(&raw)
        } else {
            text::clean(&raw)
        };
        let _ = std::io::stderr().lock().write_all(shown.as_bytes());
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;

    fn make_writer(&'a self) -> LogLine {
        LogLine {
            buf: Vec::new(),
            ansi: self.ansi,
        }
    }
}

/// Replace the default panic message (written straight to stderr) with the same text cleaned:
/// a panic's message or a value it formats must not bypass the choke point either.
/// `RUST_BACKTRACE` works as usual.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "Box<dyn Any>".to_string());
        let thread = std::thread::current();
        let location = info
            .location()
            .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_default();
        let backtrace = std::backtrace::Backtrace::capture();
        let trace = match backtrace.status() {
            std::backtrace::BacktraceStatus::Captured => format!("\n{backtrace}"),
            _ => "\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"
                .to_string(),
        };
        err_line(&format!(
            "thread '{}' panicked{location}:\n{message}{trace}",
            thread.name().unwrap_or("<unnamed>")
        ));
    }));
}

/// proxops's own crates, whose logging `-v` raises.
const OURS: [&str; 7] = [
    "proxops",
    "proxops_core",
    "proxops_runtime",
    "proxops_pve",
    "proxops_reconcile",
    "proxops_secrets",
    "proxops_sim",
];

/// Install the process's tracing subscriber. `-v` raises proxops's own logging (info, then
/// debug: stage timings, retries); other crates stay at warn. `PROXOPS_LOG` (an EnvFilter
/// directive) replaces both. Every field value is cleaned inline (secrets redacted, control
/// characters escaped), and every whole line is redacted again by [`LogWriter`].
pub fn init_tracing(verbose: u8) {
    use tracing_subscriber::field::MakeExt as _;
    let level = match verbose {
        0 => None,
        1 => Some("info"),
        _ => Some("debug"),
    };
    let mut directives = vec!["warn".to_string()];
    if let Some(level) = level {
        directives.extend(OURS.iter().map(|c| format!("{c}={level}")));
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env("PROXOPS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(directives.join(",")));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fields = tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let shown = format!("{value:?}");
        let shown = text::clean_inline(&shown);
        if field.name() == "message" {
            write!(w, "{shown}")
        } else {
            write!(w, "{}={shown}", field.name())
        }
    })
    .delimited(" ");
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(fields)
        .with_writer(LogWriter { ansi })
        .with_ansi(ansi)
        .without_time()
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(secret: &str, raw: &str, expected_plain: &str, expected_ansi: &str) {
        text::register(secret).unwrap();
        assert_eq!(clean(raw), expected_plain, "clean({raw:?})");
        assert_eq!(text::redact(raw), expected_ansi, "redact({raw:?})");
    }

    #[test]
    fn log_lines_and_output_lines_are_cleaned() {
        for (secret, raw, plain, ansi) in [
            (
                "log-secret-1a2b3c",
                "\u{1b}[2mDEBUG\u{1b}[0m token=log-secret-1a2b3c",
                "\\u{1b}[2mDEBUG\\u{1b}[0m token=(sensitive)",
                "\u{1b}[2mDEBUG\u{1b}[0m token=(sensitive)",
            ),
            (
                "another secret+",
                "a=another%20secret%2B\nb=another+secret%2B\n",
                "a=(sensitive)\nb=(sensitive)\n",
                "a=(sensitive)\nb=(sensitive)\n",
            ),
        ] {
            check(secret, raw, plain, ansi);
        }
    }

    #[test]
    fn inline_values_cannot_start_a_line() {
        assert_eq!(
            inline("denied\n\u{1b}[32mApply complete"),
            "denied\\u{a}\\u{1b}[32mApply complete"
        );
    }
}
