//! The pipeline example of the top-level README, kept compiling and true.

use statepipe_pipeline::{machine, Config, Pipeline};

#[test]
fn the_readme_example_runs() -> Result<(), Box<dyn std::error::Error>> {
    let parse = Pipeline::try_map("parse", |line: String| line.trim().parse::<u64>());
    let score =
        Pipeline::shard(2, |k| Pipeline::map(&format!("score {k}"), |x: u64| x * x)).cost(2_000.0);
    let total = Pipeline::stage(
        "total",
        0u64,
        machine::step(|t: &mut u64, x: u64| {
            *t += x;
            *t
        }),
    );
    let pipeline = parse.then(score).then(total);

    let d = pipeline.deploy(&Config::new().pin(false))?;
    let (mut input, mut output, running) = (d.input, d.output, d.running);
    std::thread::spawn(move || {
        for line in ["1", "2", "x", "3"] {
            input.send(line.to_string()).unwrap();
        }
    });
    let mut got = Vec::new();
    while let Some((seq, running_total)) = output.recv() {
        got.push((seq, running_total));
    }
    assert_eq!(got, [(0, 1), (1, 5), (3, 14)]);
    let failures: Vec<String> = output.failures().map(|f| f.to_string()).collect();
    assert_eq!(failures.len(), 1);
    assert!(
        failures[0].starts_with("stage `parse` failed on input #2"),
        "{failures:?}"
    );
    assert!(running.metrics().to_string().contains("parse"));
    let done = running.join()?;
    assert_eq!(
        done.states
            .iter()
            .find(|s| s.name == "total")
            .and_then(|s| s.get::<u64>()),
        Some(&14)
    );
    Ok(())
}
