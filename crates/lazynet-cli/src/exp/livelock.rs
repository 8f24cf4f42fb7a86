//! Placeholder: being built in this session (issue 4).

use super::ExpOpts;

/// Runs the experiment.
pub fn run(_opts: &ExpOpts) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
