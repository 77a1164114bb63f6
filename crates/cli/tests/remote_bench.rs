//! The `remote/*` cases of `statepipe bench pipeline`, small: every available peer
//! moves a flood and a paced run of 64-byte items between two real `statepipe bench
//! remote-child` processes, and every item arrives once and intact (checked by
//! `run_pair`). No figure is asserted: a debug build on a shared host is no place for one.

use statepipe_bench::pipeline::remote::child::Children;
use statepipe_bench::pipeline::remote::wire::Load;
use statepipe_bench::pipeline::remote::{peer_named, PEERS};

const EXE: &str = env!("CARGO_BIN_EXE_statepipe");

fn children() -> Children {
    Children::new(vec![EXE.into(), "bench".into(), "remote-child".into()])
}

#[test]
fn every_available_peer_delivers_every_item_between_two_processes() {
    let children = children();
    let mut ran = 0;
    for peer in PEERS.iter().filter(|p| p.available().is_ok()) {
        let flood = children
            .run_pair(*peer, Load::Flood { items: 20_000 })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(flood.items, 20_000);
        assert!(flood.rate() > 0.0, "{} {flood:?}", peer.name());
        let paced = children
            .run_pair(
                *peer,
                Load::Paced {
                    items: 500,
                    rate: 10_000.0,
                },
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(paced.recorded, 450, "{}: all but the warm-up", peer.name());
        assert!(paced.p50_ns <= paced.p99_ns && paced.p99_ns <= paced.max_ns);
        ran += 1;
    }
    assert_eq!(
        ran,
        PEERS.len(),
        "statepipe (raw and serde), zmq and timely"
    );
}

#[test]
fn ours_comes_first_and_a_bad_request_fails_saying_why() {
    assert_eq!(PEERS[0].name(), "statepipe", "the row the targets read");
    assert!(peer_named("statepipe-serde").is_some());
    let out = std::process::Command::new(EXE)
        .args(["bench", "remote-child", "{not json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("request"), "{text}");
}

#[test]
fn the_remote_cases_are_named_and_filtered() {
    let out = std::process::Command::new(EXE)
        .args(["bench", "pipeline", "--case", "remote/none", "--quick"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("remote/edge/p99"), "{text}");
}
