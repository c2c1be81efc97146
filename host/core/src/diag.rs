//! Diagnostics: one problem, located by file, optional line and column, and field path.
//!
//! A diagnostic quotes at most [`MAX_QUOTE`] characters of any value: a value is quoted between
//! backticks, and every backtick-quoted span longer than that is shortened when the
//! diagnostic is made, whoever made it (the loader, a kind, a policy). Its field path is cut to
//! the same length, and the whole message to [`MAX_MESSAGE`].

use std::fmt;

/// The most characters of one value a diagnostic quotes (and of its field path).
pub const MAX_QUOTE: usize = 200;

/// The most characters of a whole diagnostic message, whoever wrote it.
pub const MAX_MESSAGE: usize = 4_000;

/// `value` cut to [`MAX_QUOTE`] characters, saying how much was left out.
pub fn quote(value: &str) -> String {
    cut(value, MAX_QUOTE)
}

/// `value` cut to `max` characters, saying how much was left out.
fn cut(value: &str, max: usize) -> String {
    match value.char_indices().nth(max) {
        None => value.to_string(),
        Some((cut, _)) => format!(
            "{}… ({} more characters)",
            &value[..cut],
            value[cut..].chars().count()
        ),
    }
}

/// `message` with every backtick-quoted span cut by [`quote`].
fn shorten_quotes(message: String) -> String {
    let parts: Vec<&str> = message.split('`').collect();
    // Odd indices are inside backticks; an unpaired last backtick leaves the tail as it is.
    let paired = parts.len() % 2 == 1;
    if !parts
        .iter()
        .enumerate()
        .any(|(i, p)| i % 2 == 1 && p.chars().nth(MAX_QUOTE).is_some())
    {
        return message;
    }
    let mut out = String::with_capacity(message.len().min(4096));
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            out.push('`');
        }
        let inside = i % 2 == 1 && (paired || i + 1 < parts.len());
        if inside {
            out.push_str(&quote(part));
        } else {
            out.push_str(part);
        }
    }
    out
}

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// A problem in the repository.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Diagnostic {
    /// Path relative to the repository root, with `/` separators.
    pub file: String,
    /// 1-based line and column, when known (YAML syntax errors).
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Field path like `spec.disks[1].ssd`; empty for the whole file.
    pub path: String,
    pub severity: Severity,
    pub message: String,
}

impl Diagnostic {
    pub fn error(
        file: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            file: file.into(),
            line: None,
            column: None,
            path: quote(&path.into()),
            severity: Severity::Error,
            message: cut(&shorten_quotes(message.into()), MAX_MESSAGE),
        }
    }

    pub fn warning(
        file: impl Into<String>,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(file, path, message)
        }
    }

    pub fn at(mut self, line: usize, column: usize) -> Self {
        self.line = Some(line);
        self.column = Some(column);
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// `file:line:column: error: spec.x: message`, the form editors and terminals link.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, ":{line}:{column}")?;
        }
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, ": {severity}: ")?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", self.message)
    }
}
