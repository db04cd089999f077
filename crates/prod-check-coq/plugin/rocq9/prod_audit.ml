(* ProD: the term audit.  After the checker's own `Qed`, `ProdAudit name "nonce" "constructs".`
   walks the kernel's term of the proved constant and of every constant it reaches that did not
   exist when the context was loaded (`ProdAuditMark.`): `abstract` sub-proofs, side
   definitions, the proposed lemmas' statements.  It refuses each construct the prover release's
   known kernel bugs need (the checker passes the list, from its bug table):

   - "fixpoint": a `fix` or `cofix` that is not a trusted fixpoint *instantiated*.  A trusted
     fixpoint is a `fix`/`cofix` subterm of the type or transparent body of a constant (or of a
     section variable's body) that existed at the mark: library and context text, checked by
     the kernel when it was loaded.  Its free variables are the binders around it in that
     constant; those bound by `let` are replaced by their definitions first, so every free
     variable left is an assumption of the context in which the kernel checked the fixpoint's
     guard.  An untrusted fixpoint is accepted when it equals a trusted one with each free
     variable replaced by some term (the same term at each occurrence; binder names, universe
     instances and universe levels aside), and each of those terms passes the audit itself.
     Why this is sound: the recursive structure (the bodies, the decreasing arguments, every
     recursive call) is the library's, symbol for symbol; only what the library's fixpoint
     takes as parameters differs, and the guard condition treats an assumption as an opaque
     variable (it never reduces through one), so the instance is the library's function applied
     to arguments.  Unfolding `Nat.add` or `List.map f` (`simpl`, `unfold`, `cbv` without
     reducing inside the fixpoint's body) yields such instances; a fixpoint built or rewritten
     by a tactic (Ltac's `context` substitution, Ltac2's `Constr.Unsafe`) does not.
   - "sprop": the sort `SProp`, binders, matches, projections, constants and inductive types
     that are proof-irrelevant (live in `SProp`), case inversion, and references to trusted
     constants or inductives whose type mentions `SProp`.

   VM and native casts are not refused here: `lia` and `ring` leave them in honest proofs, and
   every checking process runs with `-bytecode-compiler no -native-compiler no`, under which the
   kernel checks such a cast with its ordinary conversion (the VM's bugs are out of reach).

   A reference to an inductive type, or a section variable, that did not exist at the mark is
   refused whatever the list: untrusted text can declare neither.

   `ProdAuditAll "nonce" "constructs".` audits every constant that did not exist at the mark
   (the cold re-check of an assembled file runs it after the root).

   Success prints exactly `ProdAudit <nonce> ok`; a refusal is an error whose message starts
   with `ProdAudit <nonce> refused: `; a missing mark is an error too (never a success). *)

open Pp
open Names
open Constr
open Declarations

(* ------------------------------------------------------------------------- *)
(* The trusted base: the global environment when the context had been loaded. *)

let mark : Environ.env option ref = ref None

(* Only at the top level: every sentence of untrusted text runs inside the checker's proof, so
   no such sentence can move the mark past what it declares. *)
let set_mark ~pstate =
  match pstate with
  | Some _ -> CErrors.user_err (str "ProdAuditMark: not inside a proof.")
  | None -> mark := Some (Global.env ())

exception Refused of Pp.t

let refuse fmt = raise (Refused fmt)

(* Is [kn] a constant of the marked environment, with the same kernel record? *)
let trusted_constant env0 kn =
  Environ.mem_constant kn env0
  && (let cur = Global.env () in
      Environ.mem_constant kn cur
      && Environ.lookup_constant kn env0 == Environ.lookup_constant kn cur)

let trusted_mind env0 mind =
  Environ.mem_mind mind env0
  && (let cur = Global.env () in
      Environ.mem_mind mind cur
      && Environ.lookup_mind mind env0 == Environ.lookup_mind mind cur)

(* ------------------------------------------------------------------------- *)
(* The trusted fixpoints, indexed by their shape.                             *)

type decl = Assum | Def of constr | Unusable

type key = {
  cofix : bool;
  rec_args : int array;  (* empty for a cofixpoint *)
  index : int;
  first_name : string;
}

let key_of t =
  let name n = match Context.binder_name n with Name id -> Id.to_string id | Anonymous -> "_" in
  match kind t with
  | Fix ((ri, i), (nas, _, _)) ->
    Some { cofix = false; rec_args = ri; index = i; first_name = name nas.(0) }
  | CoFix (i, (nas, _, _)) ->
    Some { cofix = true; rec_args = [||]; index = i; first_name = name nas.(0) }
  | _ -> None

(* Free de Bruijn indices of [t] (at depth 0). *)
let free_rels t =
  let rec go k acc t = match kind t with
    | Rel i -> if i > k then Int.Set.add (i - k) acc else acc
    | _ -> Constr.fold_constr_with_binders succ go k acc t
  in
  go 0 Int.Set.empty t

(* [f] with every free variable bound by a `let` of [ctx] (innermost first) replaced by its
   definition; [None] when [f] refers to a binder whose nature is not known here. *)
let instantiate_lets ctx f =
  let fv = free_rels f in
  let ctx = Array.of_list ctx in
  let n = Array.length ctx in
  if Int.Set.exists (fun j -> j > n || ctx.(j - 1) = Unusable) fv then None
  else if not (Int.Set.exists (fun j -> match ctx.(j - 1) with Def _ -> true | _ -> false) fv)
  then Some f
  else begin
    (* r.(j-1): what Rel j becomes, in the indexing of [f]'s own position. *)
    let r = Array.make n (mkRel 0) in
    for j = n downto 1 do
      r.(j - 1) <- (match ctx.(j - 1) with
        | Assum | Unusable -> mkRel j
        | Def b -> Vars.substl (Array.to_list (Array.sub r j (n - j))) b)
    done;
    Some (Vars.substl (Array.to_list r) f)
  end

(* Does the constructor [c] of [ind] (or, for [c = 0], the arity) bind `let`s in a branch or
   return clause?  Those binders are definitions we do not expand: fixpoints that refer to
   them are not indexed. *)
let branch_has_lets env (ind : inductive) c =
  let (mib, mip) = Inductive.lookup_mind_specif env ind in
  ignore mib;
  if c = 0 then mip.mind_nrealdecls <> mip.mind_nrealargs
  else mip.mind_consnrealdecls.(c - 1) <> mip.mind_consnrealargs.(c - 1)

let index : (key, constr) Hashtbl.t = Hashtbl.create 4096
let indexed_env : Environ.env option ref = ref None

let rec collect env ctx t =
  (match key_of t with
   | Some k ->
     (match instantiate_lets ctx t with Some f -> Hashtbl.add index k f | None -> ())
   | None -> ());
  let assum n ctx = List.init n (fun _ -> Assum) @ ctx in
  match kind t with
  | Prod (_, ty, c) | Lambda (_, ty, c) -> collect env ctx ty; collect env (Assum :: ctx) c
  | LetIn (_, b, ty, c) ->
    collect env ctx b; collect env ctx ty; collect env (Def b :: ctx) c
  | Case (ci, _, pms, ((nas, p), _), iv, c, brs) ->
    Array.iter (collect env ctx) pms;
    let bind lets n ctx =
      if lets then List.init n (fun _ -> Unusable) @ ctx else assum n ctx in
    collect env (bind (branch_has_lets env ci.ci_ind 0) (Array.length nas) ctx) p;
    (match iv with NoInvert -> () | CaseInvert { indices } -> Array.iter (collect env ctx) indices);
    collect env ctx c;
    Array.iteri (fun i (nas, br) ->
        collect env (bind (branch_has_lets env ci.ci_ind (i + 1)) (Array.length nas) ctx) br)
      brs
  | Fix (_, (nas, tys, bds)) | CoFix (_, (nas, tys, bds)) ->
    Array.iter (collect env ctx) tys;
    Array.iter (collect env (assum (Array.length nas) ctx)) bds
  | _ -> Constr.iter (collect env ctx) t

let build_index env0 =
  match !indexed_env with
  | Some e when e == env0 -> ()
  | _ ->
    Hashtbl.reset index;
    Environ.fold_constants (fun _ cb () ->
        collect env0 [] cb.const_type;
        match cb.const_body with
        | Def c -> collect env0 [] c
        | Undef _ | OpaqueDef _ | Primitive _ | Symbol _ -> ())
      env0 ();
    List.iter (fun d ->
        match d with
        | Context.Named.Declaration.LocalDef (_, b, ty) -> collect env0 [] b; collect env0 [] ty
        | Context.Named.Declaration.LocalAssum (_, ty) -> collect env0 [] ty)
      (Environ.named_context env0);
    indexed_env := Some env0

(* ------------------------------------------------------------------------- *)
(* Matching an untrusted term against a trusted fixpoint.                     *)

exception No_match

(* What a free variable of a trusted fixpoint stands for: [(n, body)], the term
   `fun y1 .. yn => body` (n = 0: [body] itself), its free variables numbered from the
   fixpoint's own position.  Kept eta-short, so that [f] and `fun y => f y` are one image. *)
type image = int * constr

let rec eta_short (n, body) =
  if n = 0 then (n, body) else
  match kind body with
  | App (h, args) when
      (let m = Array.length args in
       m >= 1 && isRelN 1 args.(m - 1) && Vars.noccurn 1 h
       && Array.for_all (Vars.noccurn 1) (Array.sub args 0 (m - 1))) ->
    let m = Array.length args in
    let h' = if m = 1 then h else mkApp (h, Array.sub args 0 (m - 1)) in
    eta_short (n - 1, Vars.lift (-1) h')
  | _ -> (n, body)

(* [x], seen under [k] binders of the fixpoint, with the distinct bound variables [bs]
   (de Bruijn indices <= k, as the trusted fixpoint applies its free variable to them) made
   the parameters of an image; [None] when [x] uses another of the [k] bound variables. *)
let abstract_over k bs x =
  let n = Array.length bs in
  let exception Escapes in
  let rec go d t = match kind t with
    | Rel r when r > d ->
      let r' = r - d in
      (match CArray.findi (fun _ b -> b = r') bs with
       | Some i -> mkRel (d + n - i)
       | None -> if r' <= k then raise Escapes else mkRel (d + n + r' - k))
    | _ -> Constr.map_with_binders succ go d t
  in
  match go 0 x with
  | body -> Some (eta_short (n, body))
  | exception Escapes -> None

let same_image (n1, b1) (n2, b2) =
  let rec strip n t = if n = 0 then Some t else match kind t with
    | Lambda (_, _, c) -> strip (n - 1) c
    | _ -> None in
  if n1 = n2 then Constr.equal b1 b2
  else if n1 < n2 then
    (match strip (n2 - n1) b1 with Some b -> Constr.equal b b2 | None -> false)
  else (match strip (n1 - n2) b2 with Some b -> Constr.equal b1 b | None -> false)

let bind sigma j img =
  match Int.Map.find_opt j !sigma with
  | None -> sigma := Int.Map.add j img !sigma
  | Some w -> if not (same_image w img) then raise No_match

(* The bound variables [args] stand for, when they are distinct bound variables (<= k). *)
let bound_vars k args =
  let rels = Array.map (fun a -> match kind a with Rel i when i <= k -> i | _ -> 0) args in
  let distinct = Array.for_all (fun i -> i > 0) rels
    && Array.length (Array.of_list (List.sort_uniq Int.compare (Array.to_list rels)))
       = Array.length rels in
  if distinct then Some rels else None

(* [pm sigma k p x]: [p] (trusted, its free variables are meta-variables) matches [x] under [k]
   binders entered on both sides. *)
let rec pm sigma k p x =
  match kind p with
  | Rel i when i > k ->
    (match abstract_over k [||] x with
     | Some img -> bind sigma (i - k) img
     | None -> raise No_match)
  | App (f, args) when (match kind f with Rel i -> i > k | _ -> false) ->
    let j = (match kind f with Rel i -> i - k | _ -> assert false) in
    (* A free variable applied to distinct bound variables (a pattern in Miller's sense):
       whatever [x] is there, unfolding may have beta-reduced the application. *)
    (match bound_vars k args with
     | Some bs when (match abstract_over k bs x with
         | Some img -> bind sigma j img; true
         | None -> false) -> ()
     | _ ->
       (* Otherwise the free variable may stand for an application itself. *)
       match kind x with
       | App (g, xargs) when Array.length xargs >= Array.length args ->
         let extra = Array.length xargs - Array.length args in
         let head = if extra = 0 then g else mkApp (g, Array.sub xargs 0 extra) in
         pm sigma k f head;
         Array.iteri (fun i a -> pm sigma k a xargs.(extra + i)) args
       | _ -> raise No_match)
  | _ -> pm_same sigma k p x

and pm_array sigma k a b =
  if Array.length a <> Array.length b then raise No_match;
  Array.iter2 (pm sigma k) a b

and pm_same sigma k p x =
  match kind p, kind x with
  | Rel i, Rel j -> if i <> j then raise No_match
  | Var a, Var b -> if not (Id.equal a b) then raise No_match
  | Sort s1, Sort s2 ->
    if not (Sorts.Quality.equal (Sorts.quality s1) (Sorts.quality s2)) then raise No_match
  | Cast (c1, k1, t1), Cast (c2, k2, t2) ->
    if k1 <> k2 then raise No_match; pm sigma k c1 c2; pm sigma k t1 t2
  | Prod (_, t1, c1), Prod (_, t2, c2) | Lambda (_, t1, c1), Lambda (_, t2, c2) ->
    pm sigma k t1 t2; pm sigma (k + 1) c1 c2
  | LetIn (_, b1, t1, c1), LetIn (_, b2, t2, c2) ->
    pm sigma k b1 b2; pm sigma k t1 t2; pm sigma (k + 1) c1 c2
  | App (f1, a1), App (f2, a2) -> pm sigma k f1 f2; pm_array sigma k a1 a2
  | Const (c1, _), Const (c2, _) -> if not (Constant.CanOrd.equal c1 c2) then raise No_match
  | Ind (i1, _), Ind (i2, _) -> if not (Ind.CanOrd.equal i1 i2) then raise No_match
  | Construct (c1, _), Construct (c2, _) ->
    if not (Construct.CanOrd.equal c1 c2) then raise No_match
  | Case (ci1, _, pms1, ((nas1, p1), _), iv1, c1, bl1),
    Case (ci2, _, pms2, ((nas2, p2), _), iv2, c2, bl2) ->
    if not (Ind.CanOrd.equal ci1.ci_ind ci2.ci_ind) then raise No_match;
    pm_array sigma k pms1 pms2;
    if Array.length nas1 <> Array.length nas2 then raise No_match;
    pm sigma (k + Array.length nas1) p1 p2;
    (match iv1, iv2 with
     | NoInvert, NoInvert -> ()
     | CaseInvert { indices = a }, CaseInvert { indices = b } -> pm_array sigma k a b
     | _ -> raise No_match);
    pm sigma k c1 c2;
    if Array.length bl1 <> Array.length bl2 then raise No_match;
    Array.iter2 (fun (n1, b1) (n2, b2) ->
        if Array.length n1 <> Array.length n2 then raise No_match;
        pm sigma (k + Array.length n1) b1 b2) bl1 bl2
  | Fix ((r1, i1), (n1, t1, b1)), Fix ((r2, i2), (n2, t2, b2)) ->
    if i1 <> i2 || r1 <> r2 then raise No_match;
    pm_array sigma k t1 t2;
    pm_array sigma (k + Array.length n1) b1 b2;
    ignore n2
  | CoFix (i1, (n1, t1, b1)), CoFix (i2, (n2, t2, b2)) ->
    if i1 <> i2 then raise No_match;
    pm_array sigma k t1 t2;
    pm_array sigma (k + Array.length n1) b1 b2;
    ignore n2
  | Proj (p1, _, c1), Proj (p2, _, c2) ->
    if not (Projection.CanOrd.equal p1 p2) then raise No_match; pm sigma k c1 c2
  | Int i1, Int i2 -> if not (Uint63.equal i1 i2) then raise No_match
  | Float f1, Float f2 -> if not (Float64.equal f1 f2) then raise No_match
  | String s1, String s2 -> if not (Pstring.equal s1 s2) then raise No_match
  | Array (_, e1, d1, t1), Array (_, e2, d2, t2) ->
    pm_array sigma k e1 e2; pm sigma k d1 d2; pm sigma k t1 t2
  | _ -> raise No_match

(* The instantiation of a trusted fixpoint that [x] is, as the list of the terms that stand
   for its free variables; [None] when [x] is no trusted fixpoint's instance. *)
let instance_of x =
  match key_of x with
  | None -> None
  | Some key ->
    let rec first = function
      | [] -> None
      | f :: rest ->
        let sigma = ref Int.Map.empty in
        match pm sigma 0 f x with
        | () -> Some (List.map (fun (_, (_, body)) -> body) (Int.Map.bindings !sigma))
        | exception No_match -> first rest
    in
    first (Hashtbl.find_all index key)

(* ------------------------------------------------------------------------- *)
(* The audit.                                                                 *)

type policy = { fixpoint : bool; sprop : bool }

let policy_of_string s =
  let words = String.split_on_char ',' s |> List.map String.trim |> List.filter ((<>) "") in
  List.iter (fun w ->
      if not (List.mem w ["fixpoint"; "sprop"]) then
        CErrors.user_err (str "ProdAudit: unknown construct " ++ str w ++ str "."))
    words;
  { fixpoint = List.mem "fixpoint" words; sprop = List.mem "sprop" words }

(* A relevance variable (sort polymorphism) may stand for SProp: counted as irrelevant. *)
let irrelevant r = match r with Sorts.Relevant -> false | Sorts.Irrelevant | Sorts.RelevanceVar _ -> true

(* SProp, or a sort-polymorphic quality that may stand for it. *)
let sprop_like s = Sorts.is_sprop s || (match s with Sorts.QSort _ -> true | _ -> false)

(* Does a (trusted) type mention SProp or bind something proof-irrelevant? *)
let rec mentions_sprop t =
  match kind t with
  | Sort s -> sprop_like s
  | Prod (na, _, _) | Lambda (na, _, _) | LetIn (na, _, _, _)
    when irrelevant (Context.binder_relevance na) -> true
  | _ -> Constr.fold (fun acc c -> acc || mentions_sprop c) false t

type state = {
  env0 : Environ.env;
  policy : policy;
  visited : unit Cmap_env.t ref;
  sprop_memo : (GlobRef.t, bool) Hashtbl.t;
}

let pr_global r = Printer.pr_global r

let mind_is_sprop st mind i =
  let mib = Environ.lookup_mind mind (Global.env ()) in
  let mip = mib.mind_packets.(i) in
  irrelevant mip.mind_relevance
  || (let r = GlobRef.IndRef (mind, i) in
      match Hashtbl.find_opt st.sprop_memo r with
      | Some b -> b
      | None ->
        let b = Array.exists (fun p ->
            List.exists (fun d -> mentions_sprop (Context.Rel.Declaration.get_type d))
              p.mind_arity_ctxt
            || Array.exists mentions_sprop p.mind_user_lc) mib.mind_packets in
        Hashtbl.replace st.sprop_memo r b; b)

let check_inductive st what mind i =
  if not (trusted_mind st.env0 mind) then
    refuse (str "the inductive type " ++ MutInd.print mind ++ str " was declared by the proof");
  if st.policy.sprop && mind_is_sprop st mind i then
    refuse (str what ++ str " uses the SProp inductive type "
            ++ pr_global (GlobRef.IndRef (mind, i)))

let rec walk st t =
  let p = st.policy in
  match kind t with
  | Fix _ | CoFix _ when p.fixpoint ->
    build_index st.env0;
    (match instance_of t with
     | Some images -> List.iter (walk st) images
     | None ->
       refuse (str "a " ++ str (if isFix t then "fixpoint" else "cofixpoint")
               ++ str " that is not a library fixpoint's own: "
               ++ Printer.pr_constr_env (Global.env ()) Evd.empty t))
  | Sort s when p.sprop && sprop_like s -> refuse (str "the sort SProp")
  | (Prod (na, _, _) | Lambda (na, _, _) | LetIn (na, _, _, _))
    when p.sprop && irrelevant (Context.binder_relevance na) ->
    refuse (str "a proof-irrelevant (SProp) binder")
  | Case (ci, _, _, (_, r), iv, _, _)
    when p.sprop && (irrelevant r
                     || (match iv with NoInvert -> false | CaseInvert _ -> true)
                     || mind_is_sprop st (fst ci.ci_ind) (snd ci.ci_ind)) ->
    refuse (str "a match on or into SProp")
  | Const (kn, _) -> constant st kn
  | Ind ((mind, i), _) -> check_inductive st "the proof" mind i
  | Construct (((mind, i), _), _) -> check_inductive st "the proof" mind i
  | Proj (pr, r, _) when p.sprop && irrelevant r -> refuse (str "a proof-irrelevant projection")
  | Proj (pr, _, c) ->
    let (mind, i) = Projection.inductive pr in
    check_inductive st "a projection" mind i;
    walk st c
  | Var id ->
    if not (List.exists (fun d -> Id.equal (Context.Named.Declaration.get_id d) id) (Environ.named_context st.env0)) then
      refuse (str "the section variable " ++ Id.print id ++ str " was declared by the proof")
  | Evar _ | Meta _ -> refuse (str "an unresolved existential variable")
  | _ -> Constr.iter (walk st) t

and constant st kn =
  if trusted_constant st.env0 kn then begin
    if st.policy.sprop then begin
      let r = GlobRef.ConstRef kn in
      let bad = match Hashtbl.find_opt st.sprop_memo r with
        | Some b -> b
        | None ->
          let cb = Environ.lookup_constant kn (Global.env ()) in
          let b = irrelevant cb.const_relevance || mentions_sprop cb.const_type in
          Hashtbl.replace st.sprop_memo r b; b
      in
      if bad then refuse (str "the SProp constant " ++ pr_global r)
    end
  end
  else if not (Cmap_env.mem kn !(st.visited)) then begin
    st.visited := Cmap_env.add kn () !(st.visited);
    let cb = Environ.lookup_constant kn (Global.env ()) in
    if st.policy.sprop && irrelevant cb.const_relevance then
      refuse (str "the SProp constant " ++ Constant.print kn);
    (try walk st cb.const_type
     with Refused m -> refuse (str "the type of " ++ Constant.print kn ++ str ": " ++ m));
    let body = match cb.const_body with
      | Def c -> Some c
      | OpaqueDef o ->
        (match Global.force_proof Library.indirect_accessor o with
         | c, _ -> Some c
         | exception _ ->
           refuse (str "the body of " ++ Constant.print kn ++ str " cannot be read"))
      | Undef _ | Primitive _ | Symbol _ -> None
    in
    match body with
    | Some c ->
      (try walk st c
       with Refused m -> refuse (str "the body of " ++ Constant.print kn ++ str ": " ++ m))
    | None -> ()
  end

let new_state constructs =
  match !mark with
  | None -> CErrors.user_err (str "ProdAudit: no ProdAuditMark in this process.")
  | Some env0 ->
    { env0; policy = policy_of_string constructs; visited = ref Cmap_env.empty;
      sprop_memo = Hashtbl.create 64 }

let report nonce f =
  match f () with
  | () -> Feedback.msg_notice (str "ProdAudit " ++ str nonce ++ str " ok")
  | exception Refused m ->
    CErrors.user_err (str "ProdAudit " ++ str nonce ++ str " refused: " ++ m)

(* `ProdAudit name "nonce" "constructs".` *)
let audit r nonce constructs =
  let st = new_state constructs in
  let gr = Smartlocate.global_with_alias r in
  report nonce (fun () ->
      match gr with
      | GlobRef.ConstRef kn ->
        if trusted_constant st.env0 kn then
          refuse (str "ProdAudit: the constant existed before the attempt")
        else constant st kn
      | _ -> refuse (str "ProdAudit: not a constant"))

(* `ProdAuditAll "nonce" "constructs".` *)
let audit_all nonce constructs =
  let st = new_state constructs in
  report nonce (fun () ->
      Environ.fold_constants (fun kn _ () ->
          if not (trusted_constant st.env0 kn) then constant st kn)
        (Global.env ()) ())

(* ------------------------------------------------------------------------- *)
(* The universe constraints a proof added.                                    *)

(* A monomorphic proof may fix its statement's universe levels more than the statement does
   (`forall A : Type, {B : Small & A = B}` proved with `A = Small`), or constrain the context's
   levels: it then proves its statement only at some levels, and another node that proposed the
   statement may use it at others (Hurkens' paradox proves `False`).  So:

   - `ProdProofUniverses "nonce".`, in the checker's proof right before its `Qed`, keeps the
     global universe graph (without this proof's constraints, which join it at `Qed`), the
     proof's own universe levels and constraints (statement and proof), and the statement as
     elaborated; it prints `polymorphic` (compared by the checker another way), `compare` when
     the statement has levels of its own (then the checker restates it), or else the verdict:
     `none`, `added: …`, `unknown: …` (without own levels, the restated statement is the
     graph itself).
   - `ProdCompareUniverses "nonce".`, in the proof of the same statement restated under a fresh
     name (then aborted), compares: the proof's statement levels are mapped to the restated
     statement's (the two statements' levels paired in one traversal order; a level of the
     graph must stand for itself), the proof's constraints are added, so mapped, to the graph
     with the restated statement's constraints (its other levels fresh), and every constraint
     this implies among the restated statement's levels and the graph's levels that the proof
     mentions must already hold with the statement's constraints alone.  Otherwise the proof
     added it.  Prints `none`, `added: c1; c2` or `unknown: why`. *)

let sort_levels s = match s with
  | Sorts.Type u | Sorts.QSort (_, u) -> List.map fst (Univ.Universe.repr u)
  | _ -> []

let instance_levels u = Array.to_list (snd (UVars.Instance.to_array u))

(* Every universe level of [t], in one traversal order. *)
let levels_in_order t =
  let rec go acc t =
    let acc = match kind t with
      | Sort s -> List.rev_append (sort_levels s) acc
      | Const (_, u) | Ind (_, u) | Construct (_, u) | Case (_, u, _, _, _, _, _)
      | Array (u, _, _, _) -> List.rev_append (instance_levels u) acc
      | _ -> acc
    in
    Constr.fold go acc t
  in
  List.rev (go [] t)

exception Unknown of string

(* The proof's statement levels mapped to the restated statement's: the pairs of the two
   traversals, where a level of the graph [dom] must stand for itself. *)
let level_map dom th tr =
  let lh = levels_in_order th and lr = levels_in_order tr in
  if List.length lh <> List.length lr then raise (Unknown "the restated statement has other levels");
  List.fold_left2 (fun m a b ->
      if Univ.Level.Set.mem a dom || Univ.Level.Set.mem b dom then
        if Univ.Level.equal a b then m else raise (Unknown "a level of the context moved")
      else match Univ.Level.Map.find_opt a m with
        | Some b' when Univ.Level.equal b b' -> m
        | Some _ -> raise (Unknown "the levels do not correspond")
        | None -> Univ.Level.Map.add a b m)
    Univ.Level.Map.empty lh lr

type captured = {
  graph : UGraph.t;
  levels : Univ.Level.Set.t;
  constraints : Univ.UnivConstraints.t;
  statement : Constr.t;
}

let captured_proof : captured option ref = ref None

let capture pstate =
  let p = Declare.Proof.get pstate in
  let d = Proof.data p in
  let statement = match Proofview.initial_goals d.Proof.entry with
    | (_, _, ty) :: _ -> EConstr.to_constr ~abort_on_undefined_evars:false d.Proof.sigma ty
    | [] -> CErrors.user_err (str "ProdUniverses: no statement.") in
  let (levels, constraints) = Evd.universe_context_set d.Proof.sigma in
  ({ graph = Environ.universes (Global.env ()); levels; constraints; statement },
   PolyFlags.univ_poly d.Proof.poly)

let declare levels g =
  let dom = UGraph.domain g in
  Univ.Level.Set.fold (fun l g ->
      if Univ.Level.Set.mem l dom then g
      else UGraph.add_universe l ~strict:false g) levels g

let levels_of_constraints cs =
  Univ.UnivConstraints.fold (fun (a, _, b) acc -> Univ.Level.Set.add a (Univ.Level.Set.add b acc))
    cs Univ.Level.Set.empty

let pr_constraint (a, d, b) =
  let op = match d with
    | Univ.UnivConstraint.Lt -> " < " | Univ.UnivConstraint.Le -> " <= "
    | Univ.UnivConstraint.Eq -> " = " in
  Univ.Level.to_string a ^ op ^ Univ.Level.to_string b

(* The constraints proof [h] added beyond what the restated statement [r] imposes. *)
let added_constraints h r =
  let dom = UGraph.domain h.graph in
  let sigma = level_map dom h.statement r.statement in
  let map l = Option.default l (Univ.Level.Map.find_opt l sigma) in
  let with_statement =
    UGraph.merge_constraints r.constraints (declare r.levels h.graph) in
  let internal = Univ.Level.Set.filter
      (fun l -> not (Univ.Level.Map.mem l sigma) && not (Univ.Level.Set.mem l dom)) h.levels in
  let mapped = Univ.UnivConstraints.fold (fun (a, d, b) acc ->
      Univ.UnivConstraints.add (map a, d, map b) acc) h.constraints Univ.UnivConstraints.empty in
  match UGraph.merge_constraints mapped (declare internal with_statement) with
  | exception _ -> [ "inconsistent with the statement's own levels" ]
  | with_proof ->
    let kept = Univ.Level.Set.union
        (Univ.Level.Map.fold (fun _ b acc -> Univ.Level.Set.add b acc) sigma Univ.Level.Set.empty)
        (Univ.Level.Set.inter dom (levels_of_constraints h.constraints)) in
    UGraph.constraints_for ~kept with_proof
    |> Univ.UnivConstraints.elements
    |> List.filter (fun c -> not (UGraph.check_constraint with_statement c))
    |> List.map pr_constraint

let report head = function
  | [] -> head ++ str " none"
  | cs -> head ++ str " added: " ++ str (String.concat "; " cs)

let proof_universes ~pstate nonce =
  let head = str "ProdProofUniverses " ++ str nonce in
  match pstate with
  | None -> CErrors.user_err (str "ProdProofUniverses: no proof.")
  | Some p ->
    let (c, poly) = capture p in
    captured_proof := Some c;
    let dom = UGraph.domain c.graph in
    let own = List.exists (fun l -> not (Univ.Level.Set.mem l dom)) (levels_in_order c.statement) in
    Feedback.msg_notice (
      if poly then head ++ str " polymorphic"
      else if Univ.UnivConstraints.is_empty c.constraints then head ++ str " none"
      else if own then head ++ str " compare"
      else
        (* No level of its own: what the proof may not add is a constraint among the graph's
           levels, which the statement restated would not change. *)
        let same = { c with levels = Univ.Level.Set.empty; constraints = Univ.UnivConstraints.empty } in
        match added_constraints c same with
        | cs -> report head cs
        | exception Unknown why -> head ++ str " unknown: " ++ str why)

let compare_universes ~pstate nonce =
  let head = str "ProdCompareUniverses " ++ str nonce in
  let h = match !captured_proof with
    | Some h -> h
    | None -> CErrors.user_err (str "ProdCompareUniverses: no ProdProofUniverses before.") in
  match pstate with
  | None -> CErrors.user_err (str "ProdCompareUniverses: no proof.")
  | Some p ->
    let (r, _) = capture p in
    Feedback.msg_notice (match added_constraints h r with
        | cs -> report head cs
        | exception Unknown why -> head ++ str " unknown: " ++ str why)
