//! Regenerates `host/sim/schema/pve-api-sim.json` from the vendored PVE API schema
//! (`vendor/pve-api-schema/pve-api-schema.json`) and `host/sim/schema/{served.txt,supplement.json}`.
//!
//! Run after changing the served endpoints or updating the vendored schema:
//! `cargo run -p proxops-sim --example regen-schema`.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let full = crate_dir.join("../../vendor/pve-api-schema/pve-api-schema.json");
    let out = crate_dir.join("schema/pve-api-sim.json");
    let text = match std::fs::read_to_string(&full) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e}", full.display());
            return ExitCode::FAILURE;
        }
    };
    let trimmed = match proxops_sim::trimmed_schema(&text) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::write(&out, trimmed) {
        eprintln!("error: {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {}", out.display());
    ExitCode::SUCCESS
}
