//! The frame decoder and payload decoders over random, mutated and corpus
//! input: round trips hold, and nothing panics.

use proptest::prelude::*;

use crate::evolve::StateId;
use crate::protocol::{self, msg, FrameError, Kind, DEFAULT_MAX_FRAME, HEADER_LEN};

/// Every decoder a master or worker may run on a payload.
fn decode_everything(bytes: &[u8]) {
    crate::fuzz::decode_all(bytes, &super::registry());
}

fn sample_frames() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Evolve);
    msg::put_evolve_head(&mut f, 3, true, 2);
    for (id, input) in [(1u64, &b"ab"[..]), (2, b"")] {
        msg::put_u64(&mut f, id);
        msg::put_bytes(&mut f, input);
    }
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Add);
    msg::put_states(&mut f, [(StateId(7), &b"state"[..])].into_iter());
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Evolved);
    msg::put_u64(&mut f, 1000);
    msg::put_u32(&mut f, 1);
    msg::put_u64(&mut f, 7);
    msg::put_u32(&mut f, 2);
    for c in [8u64, 9] {
        msg::put_u64(&mut f, c);
        msg::put_bytes(&mut f, b"out");
    }
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Setup);
    msg::put_setup(
        &mut f,
        &msg::Setup {
            seed: 1,
            model: "sleep",
            params: &[],
            heartbeat_ms: 1000,
        },
    );
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Remove);
    msg::put_ids(&mut f, &[StateId(1), StateId(2)]);
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Give);
    msg::put_give(&mut f, 9, "127.0.0.1:1", &[StateId(7)]);
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Handoff);
    msg::put_u64(&mut f, 9);
    msg::put_states(&mut f, [(StateId(7), &b"state"[..])].into_iter());
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Arrived);
    msg::put_u64(&mut f, 9);
    msg::put_u32(&mut f, 1);
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Replicate);
    msg::put_replicate(
        &mut f,
        &msg::Replicate {
            round: 4,
            origin: 1,
            to: "127.0.0.1:1",
        },
    );
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Replica);
    msg::put_u64(&mut f, 4);
    msg::put_u32(&mut f, 1);
    msg::put_u32(&mut f, 2);
    msg::put_states(&mut f, [(StateId(7), &b"state"[..])].into_iter());
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    protocol::encode(&mut f, Kind::Commit, &4u64.to_le_bytes());
    v.push(f);
    let mut f = Vec::new();
    let st = protocol::begin(&mut f, Kind::Promote);
    msg::put_ids(&mut f, &[StateId(7)]);
    protocol::finish(&mut f, st);
    v.push(f);
    let mut f = Vec::new();
    protocol::encode(&mut f, Kind::Leaving, &[]);
    v.push(f);
    v
}

fn corpus() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut v: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| std::fs::read(e.ok()?.path()).ok())
                .collect()
        })
        .unwrap_or_default();
    v.extend(sample_frames());
    v
}

#[test]
fn corpus_decodes_without_panic() {
    let c = corpus();
    assert!(c.len() >= 8);
    for bytes in c {
        decode_everything(&bytes);
    }
}

/// Regenerates `tests/corpus` from the sample frames.
#[test]
#[ignore = "writes files; run by hand after a protocol change"]
fn write_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    for (i, f) in sample_frames().iter().enumerate() {
        std::fs::write(dir.join(format!("frame-{i}.bin")), f).unwrap();
    }
}

#[test]
fn header_errors_are_named() {
    let mut f = Vec::new();
    protocol::encode(&mut f, Kind::Drop, &[1, 2, 3]);
    let mut bad = f.clone();
    bad[0] = 0;
    assert_eq!(protocol::decode(&bad, 64), Err(FrameError::BadMagic(0)));
    let mut bad = f.clone();
    bad[1] = 99;
    assert_eq!(protocol::decode(&bad, 64), Err(FrameError::BadVersion(99)));
    let mut bad = f.clone();
    bad[2] = 0x7f;
    assert_eq!(
        protocol::decode(&bad, 64),
        Err(FrameError::UnknownKind(0x7f))
    );
    let mut bad = f.clone();
    bad[3] = 1;
    assert_eq!(protocol::decode(&bad, 64), Err(FrameError::Reserved(1)));
    assert_eq!(
        protocol::decode(&f, 2),
        Err(FrameError::TooLarge { len: 3, max: 2 })
    );
    for cut in 0..f.len() {
        assert_eq!(protocol::decode(&f[..cut], 64), Ok(None), "cut at {cut}");
    }
    assert_eq!(msg::ids(&[5, 0, 0, 0]), Err(msg::MsgError::Count(5)));
    assert_eq!(
        msg::count(&[1, 0, 0, 0, 9]),
        Err(msg::MsgError::Trailing(1))
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(debug_assertions) { 256 } else { 2048 }, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn frames_round_trip(kind in prop::sample::select(vec![Kind::Evolve, Kind::Add, Kind::Evolved, Kind::Failed]),
                         payload in prop::collection::vec(any::<u8>(), 0..300),
                         split in 0usize..400) {
        let mut wire = Vec::new();
        protocol::encode(&mut wire, kind, &payload);
        protocol::encode(&mut wire, Kind::Shutdown, &[]);
        let (k, p, used) = protocol::decode(&wire, DEFAULT_MAX_FRAME).unwrap().unwrap();
        prop_assert_eq!((k, p), (kind, &payload[..]));
        prop_assert_eq!(used, HEADER_LEN + payload.len());
        let (k2, _, _) = protocol::decode(&wire[used..], DEFAULT_MAX_FRAME).unwrap().unwrap();
        prop_assert_eq!(k2, Kind::Shutdown);
        // Any prefix is either incomplete or the same frame.
        let cut = split.min(wire.len());
        match protocol::decode(&wire[..cut], DEFAULT_MAX_FRAME).unwrap() {
            None => prop_assert!(cut < used),
            Some((k, p, _)) => prop_assert_eq!((k, p), (kind, &payload[..])),
        }
    }

    #[test]
    fn payloads_round_trip(items in prop::collection::vec((any::<u64>(), prop::collection::vec(any::<u8>(), 0..40)), 0..20),
                           step in any::<u64>()) {
        let mut p = Vec::new();
        msg::put_states(&mut p, items.iter().map(|(i, b)| (StateId(*i), b.as_slice())));
        let got = msg::states(&p).unwrap();
        prop_assert_eq!(got.len(), items.len());
        for ((gi, gb), (i, b)) in got.iter().zip(&items) {
            prop_assert_eq!((gi.0, *gb), (*i, b.as_slice()));
        }
        let mut e = Vec::new();
        msg::put_u64(&mut e, step);
        e.push(u8::from(step % 2 == 0));
        e.extend_from_slice(&p);
        let got = msg::evolve(&e).unwrap();
        prop_assert_eq!((got.step, got.copies, got.items.len()), (step, step % 2 == 0, items.len()));
        let ids: Vec<StateId> = items.iter().map(|x| StateId(x.0)).collect();
        let mut q = Vec::new();
        msg::put_ids(&mut q, &ids);
        prop_assert_eq!(msg::ids(&q).unwrap(), ids);
    }

    #[test]
    fn transfer_payloads_round_trip(ticket in any::<u64>(), to in "[0-9.:a-z]{0,30}",
                                    ids in prop::collection::vec(any::<u64>(), 0..20), n in any::<u32>()) {
        let ids: Vec<StateId> = ids.into_iter().map(StateId).collect();
        let mut p = Vec::new();
        msg::put_give(&mut p, ticket, &to, &ids);
        let g = msg::give(&p).unwrap();
        prop_assert_eq!((g.ticket, g.to, &g.ids), (ticket, to.as_str(), &ids));
        let mut a = Vec::new();
        msg::put_u64(&mut a, ticket);
        msg::put_u32(&mut a, n);
        prop_assert_eq!(msg::arrived(&a).unwrap(), (ticket, n));
        let mut h = Vec::new();
        msg::put_u64(&mut h, ticket);
        msg::put_states(&mut h, ids.iter().map(|&i| (i, &b"s"[..])));
        let (t, got) = msg::handoff(&h).unwrap();
        prop_assert_eq!((t, got.len()), (ticket, ids.len()));
        let mut o = Vec::new();
        msg::put_bytes(&mut o, to.as_bytes());
        let want = if to.is_empty() { None } else { Some(to.as_str()) };
        prop_assert_eq!(msg::setup_ok(if to.is_empty() { &[] } else { &o[..] }).unwrap(), want);
    }

    #[test]
    fn replication_payloads_round_trip(round in any::<u64>(), origin in any::<u32>(), to in "[0-9.:a-z]{0,30}",
                                       items in prop::collection::vec((any::<u64>(), prop::collection::vec(any::<u8>(), 0..20)), 0..10)) {
        let mut p = Vec::new();
        msg::put_replicate(&mut p, &msg::Replicate { round, origin, to: &to });
        prop_assert_eq!(msg::replicate(&p).unwrap(), msg::Replicate { round, origin, to: &to });
        let mut r = Vec::new();
        msg::put_u64(&mut r, round);
        msg::put_u32(&mut r, origin);
        msg::put_u32(&mut r, items.len() as u32);
        msg::put_states(&mut r, items.iter().map(|(i, b)| (StateId(*i), b.as_slice())));
        let got = msg::replica(&r).unwrap();
        prop_assert_eq!((got.round, got.origin, got.total as usize), (round, origin, items.len()));
        for ((gi, gb), (i, b)) in got.states.iter().zip(&items) {
            prop_assert_eq!((gi.0, *gb), (*i, b.as_slice()));
        }
        prop_assert_eq!(msg::held(&r[..16]).unwrap(), (round, origin, items.len() as u32));
        prop_assert_eq!(msg::commit(&round.to_le_bytes()).unwrap(), round);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_everything(&bytes);
        // Also behind a valid header, so the payload decoders see them.
        for kind in [Kind::Evolve, Kind::Evolved, Kind::Add, Kind::Setup, Kind::Remove, Kind::Give,
                     Kind::Replicate, Kind::Commit, Kind::Promote] {
            let mut f = Vec::new();
            protocol::encode(&mut f, kind, &bytes);
            decode_everything(&f);
        }
    }

    #[test]
    fn mutated_frames_never_panic(which in any::<prop::sample::Index>(),
                                  flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
                                  cut in any::<prop::sample::Index>()) {
        let frames = corpus();
        let mut f = frames[which.index(frames.len())].clone();
        for (at, b) in flips {
            let i = at.index(f.len());
            f[i] ^= b;
        }
        let n = cut.index(f.len() + 1);
        decode_everything(&f[..n]);
        decode_everything(&f);
    }
}
