//! A link's rules and targets as a caller sends them: any JSON is accepted or refused with
//! a field path, never a panic, and what is accepted shows (`rules_json`, `targets_json`) as
//! JSON that reads back to the same rules and targets.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vshortlink::links::{rules_json, targets_json, OptionsInput};
use vshortlink::model::LinkOptions;

#[path = "../shared/links.rs"]
mod shared;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let links = shared::links("");
    let input = OptionsInput {
        rules: Some(Some(value.clone())),
        targets: Some(Some(value)),
        ..OptionsInput::default()
    };
    // Rules and targets are read independently; whichever is accepted must round-trip.
    for (rules, targets) in [(true, false), (false, true)] {
        let mut one = input.clone();
        if !rules {
            one.rules = None;
        }
        if !targets {
            one.targets = None;
        }
        let Ok(patch) = links.check_options(one) else {
            continue;
        };
        if let Some(accepted) = patch.rules {
            let again = links
                .check_options(OptionsInput {
                    rules: Some(Some(rules_json(&accepted))),
                    ..OptionsInput::default()
                })
                .expect("shown rules read back");
            assert_eq!(again.rules, Some(accepted));
        }
        if let Some(accepted) = patch.targets {
            let again = links
                .check_options(OptionsInput {
                    targets: Some(Some(targets_json(
                        &LinkOptions {
                            targets: accepted.clone(),
                            ..LinkOptions::default()
                        },
                        &[],
                    ))),
                    ..OptionsInput::default()
                })
                .expect("shown targets read back");
            assert_eq!(again.targets, Some(accepted));
        }
    }
});
