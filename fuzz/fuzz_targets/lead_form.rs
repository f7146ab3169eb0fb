//! A link's form as a caller sends it, and a visitor's values against it: any JSON is
//! accepted or refused with a field path, never a panic; an accepted form shows (`form_json`)
//! as JSON that reads back to the same form; any values are stored or refused per field, and
//! a stored value passes its field's check again unchanged (normalising is idempotent).
#![no_main]

use libfuzzer_sys::fuzz_target;
use vshortlink::links::{form_json, OptionsInput};

#[path = "../shared/links.rs"]
mod shared;

fuzz_target!(|data: &[u8]| {
    // The first line is the form's JSON; the rest are the visitor's values, one a line.
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let Some(Ok(value)) = lines.next().map(serde_json::from_str::<serde_json::Value>) else {
        return;
    };
    let links = shared::links("");
    let Ok(patch) = links.check_options(OptionsInput {
        form: Some(Some(value)),
        ..OptionsInput::default()
    }) else {
        return;
    };
    let Some(Some(form)) = patch.form else {
        return;
    };
    let again = links
        .check_options(OptionsInput {
            form: Some(Some(form_json(&form))),
            ..OptionsInput::default()
        })
        .expect("a shown form reads back");
    assert_eq!(again.form, Some(Some(form.clone())));
    let values: Vec<&str> = lines.collect();
    let value_of = |name: &str| {
        form.fields
            .iter()
            .position(|f| f.name == name)
            .and_then(|i| values.get(i).copied())
    };
    if let Ok(stored) = form.check(value_of, true) {
        for (field, (_, value)) in form.fields.iter().zip(&stored) {
            assert_eq!(field.check(value).as_deref(), Ok(value.as_str()));
        }
    }
});
