//! The map state's promise, over random rule sets: whatever the datapath's
//! two-lookup walk picks, a packet any deny rule matches is denied, a
//! packet only allows match is allowed, and anything else matches nothing.

use policy::mapstate::Key;
use policy::{MapState, Verdict};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = Key> {
    (
        0u32..4,
        any::<bool>(),
        prop::sample::select(vec![0u8, 6, 17]),
        0u16..16,
        prop::sample::select(vec![0u8, 12, 14, 16]),
    )
        .prop_map(|(id, egress, proto, port, prefix)| {
            Key::new(id, egress, proto, 8000 + port, prefix)
        })
}

fn hits(k: &Key, id: u32, egress: bool, proto: u8, port: u16) -> bool {
    k.covers(&Key::new(id, egress, proto, port, 16))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    #[test]
    fn deny_always_wins_and_nothing_is_lost(
        allows in prop::collection::vec(key(), 0..6),
        denies in prop::collection::vec(key(), 0..4),
        id in 1u32..4,
        egress in any::<bool>(),
        proto in prop::sample::select(vec![6u8, 17]),
        port in 8000u16..8016,
    ) {
        let state = MapState::build(&allows, &denies);
        let verdict = state.lookup(id, egress, proto, port);
        let denied = denies.iter().any(|k| hits(k, id, egress, proto, port));
        let allowed = allows.iter().any(|k| hits(k, id, egress, proto, port));
        match verdict {
            Verdict::Denied(..) => prop_assert!(denied, "{state:?}"),
            Verdict::Allowed(..) => prop_assert!(allowed && !denied, "{state:?}"),
            Verdict::NoMatch => prop_assert!(!allowed && !denied, "{state:?}"),
        }
        if denied {
            prop_assert!(matches!(verdict, Verdict::Denied(..)), "{state:?}");
        }
    }
}
