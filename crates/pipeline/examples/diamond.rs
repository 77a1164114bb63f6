//! A first pipeline: orders are validated, then fan out to two branches
//! (pricing, sharded by customer, and a fraud score) that join again.
//!
//! The deployed pipeline must compute exactly what the sequential meaning
//! computes; the program checks that at the end.
//!
//! Run with `cargo run --example diamond -p statepipe-pipeline`.

use statepipe_pipeline::{machine, Config, Pipeline};

#[derive(Clone, Debug)]
struct Order {
    customer: u32,
    cents: u64,
}

/// validate → (price per customer ‖ fraud score) → decide.
fn orders() -> Pipeline<Order, String> {
    // A per-item error: the order goes to the failures, the pipeline goes on.
    let validate = Pipeline::try_map("validate", |o: Order| {
        if o.cents == 0 {
            return Err("empty order");
        }
        Ok(o)
    });
    // Each customer's orders reach the same copy, so its running total
    // (the copy's state) sees all of them, in input order.
    let price = Pipeline::shard_by_key(
        2,
        |o: &Order| o.customer,
        |k| {
            Pipeline::stage(
                &format!("price {k}"),
                0u64,
                machine::step(|spent: &mut u64, o: Order| {
                    *spent += o.cents;
                    (o.customer, *spent)
                }),
            )
        },
    );
    let fraud = Pipeline::map("fraud", |o: Order| o.cents > 50_000);
    let decide = Pipeline::map(
        "decide",
        |((customer, spent), suspicious): ((u32, u64), bool)| {
            let verdict = if suspicious { "hold" } else { "ship" };
            format!("customer {customer}: {verdict} (spent {spent})")
        },
    );
    validate.then(price.fan_out(fraud)).then(decide)
}

fn main() {
    let input: Vec<Order> = (0..1_000u64)
        .map(|i| Order {
            customer: (i % 7) as u32,
            cents: (i * 977) % 60_000,
        })
        .collect();

    let expected = orders().run_sequential(input.clone());
    let deployed = orders()
        .deploy(&Config::new().workers(2))
        .expect("the deployment starts")
        .run(input)
        .expect("no stage panicked");

    println!(
        "{} outputs, {} failures",
        deployed.outputs.len(),
        deployed.failures.len()
    );
    for line in deployed.outputs.iter().take(3) {
        println!("  {line}");
    }
    let f = &deployed.failures[0];
    println!(
        "  first failure: item {} at `{}`: {}",
        f.seq, f.stage, f.error
    );

    assert_eq!(deployed.outputs, expected.outputs);
    assert_eq!(deployed.failures.len(), expected.failures.len());
    assert_eq!(
        deployed.state::<u64>("price 0"),
        expected.state::<u64>("price 0")
    );
    println!("deployed on 2 workers == run_sequential");
}
