//! A compiled library that is not installed (a user's project), bound with `-Q dir Root`: the
//! workers and the cold final check load it from the read-only sandbox mount; without the
//! binding its imports do not load; a binding of the prover's own root is refused; the
//! compiled files are part of the fingerprint.

use crate::common;

use std::time::Duration;

use prod_check::{CheckRequest, Checker, VerdictKind};
use prod_check_coq::{final_check, CoqCheckConfig, CoqChecker, LoadPathBinding, RenderedFile};
use prod_core::ConditionalProof;

/// `dir/MyLib/Base.vo`, compiled with the checker's flags; `None` without coqc.
fn compiled_library(dir: &std::path::Path, body: &str) -> Option<std::path::PathBuf> {
    let lib = dir.join("MyLib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(lib.join("Base.v"), body).unwrap();
    let out = std::process::Command::new("coqc")
        .current_dir(dir)
        .args([
            "-q",
            "-noglob",
            "-bytecode-compiler",
            "no",
            "-native-compiler",
            "no",
        ])
        .args(["-Q", "MyLib", "MyLib", "MyLib/Base.v"])
        .output();
    match out {
        Ok(o) if o.status.success() => Some(lib),
        Ok(o) => panic!("coqc: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => {
            prod_test_support::require(false, "coqc is not installed");
            None
        }
    }
}

fn config(lib: Option<&std::path::Path>) -> CoqCheckConfig {
    let mut cfg = common::config(1);
    cfg.hammer.enabled = false;
    cfg.load_paths = lib
        .map(|d| {
            vec![LoadPathBinding {
                dir: d.to_path_buf(),
                logical: "MyLib".into(),
            }]
        })
        .unwrap_or_default();
    cfg
}

const CONTEXT: &str = "From MyLib Require Import Base.\nRequire Import Lia.\n";

#[test]
fn a_bound_library_loads_in_workers_and_the_final_check() {
    let _machine = common::shared_machine();
    let tmp = tempfile::tempdir().unwrap();
    let Some(lib) = compiled_library(
        tmp.path(),
        "Definition twice (n : nat) := n + n.\nLemma twice_0 : twice 0 = 0.\nProof. reflexivity. Qed.\n",
    ) else {
        return;
    };
    let req = CheckRequest::new(
        "",
        CONTEXT,
        "Lemma t : forall n, twice n = 2 * n.",
        ConditionalProof::parse_with(
            "<no_invoke> intros n. unfold twice. lia.",
            &prod_coq::CoqLanguage,
        )
        .unwrap(),
    );
    let bound = CoqChecker::new(config(Some(&lib))).unwrap();
    let v = bound.check_batch(std::slice::from_ref(&req), &|_, _| {});
    assert_eq!(v[0].kind(), VerdictKind::Proved, "{v:?}");
    let file = RenderedFile::from_parts(
        CONTEXT,
        "Lemma t : forall n, twice n = 2 * n.\nProof. intros n. unfold twice. lia. Qed.\n",
        "t",
    );
    let fv = final_check(&file, bound.config(), Duration::from_secs(60));
    assert_eq!(fv.kind(), VerdictKind::Proved, "{fv:?}");

    // Without the binding the context does not load.
    let unbound = CoqChecker::new(config(None)).unwrap();
    let v = unbound.check_batch(std::slice::from_ref(&req), &|_, _| {});
    assert_eq!(v[0].kind(), VerdictKind::Infra, "{v:?}");
    assert!(v[0].message().contains("MyLib"), "{v:?}");

    // Another build of the library is another checker.
    let fp = bound.fingerprint();
    assert!(fp.contains("load paths MyLib@1:"), "{fp}");
    std::fs::remove_file(lib.join("Base.vo")).unwrap();
    compiled_library(tmp.path(), "Definition twice (n : nat) := 2 * n.\n").unwrap();
    let rebuilt = CoqChecker::new(config(Some(&lib))).unwrap();
    assert_ne!(rebuilt.fingerprint(), fp);
}

#[test]
fn bindings_that_shadow_or_do_not_exist_are_refused() {
    let _machine = common::shared_machine();
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = config(Some(tmp.path()));
    cfg.load_paths[0].logical = "Coq".into();
    let e = CoqChecker::new(cfg.clone()).err().unwrap();
    assert!(e.contains("shadow"), "{e}");
    cfg.load_paths[0].logical = "My-Lib".into();
    assert!(cfg.validate().unwrap_err().contains("identifier"));
    cfg.load_paths[0] = LoadPathBinding::parse("/no/such/dir=MyLib").unwrap();
    assert!(cfg.validate().unwrap_err().contains("not a directory"));
    assert!(LoadPathBinding::parse("nodir").is_err());
    // An installed library's root (CoqHammer's, where it is installed) is refused too.
    let installed = std::path::Path::new("/usr/lib/ocaml/coq/user-contrib/Hammer");
    if installed.is_dir() {
        cfg.load_paths[0] = LoadPathBinding {
            dir: tmp.path().to_path_buf(),
            logical: "Hammer".into(),
        };
        let e = CoqChecker::new(cfg).err().unwrap();
        assert!(e.contains("installed"), "{e}");
    }
}
