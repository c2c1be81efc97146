//! `proxops completions SHELL` and `proxops man [SUBCOMMAND]`: generated from the clap
//! definition, so they never fall behind the flags.

use clap::CommandFactory as _;

use crate::output::out;
use crate::{Cli, exit};

/// Print the completion script of `shell`.
pub fn completions(shell: clap_complete::Shell) -> u8 {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "proxops", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    exit::OK
}

/// Print the man page of proxops, or of one subcommand (`proxops-plan(1)`).
pub fn man(subcommand: Option<&str>) -> anyhow::Result<u8> {
    let mut command = Cli::command();
    command.build();
    let (page, title) = match subcommand {
        None => (command, "proxops".to_string()),
        Some(name) => {
            let names: Vec<String> = command
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            let Some(sub) = command.find_subcommand(name) else {
                anyhow::bail!(
                    "proxops man: no subcommand `{name}` (subcommands: {})",
                    names.join(", ")
                );
            };
            let title = format!("proxops-{}", sub.get_name());
            (sub.clone(), title)
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page).title(title).render(&mut roff)?;
    out!("{}", String::from_utf8_lossy(&roff));
    Ok(exit::OK)
}
