(* ProD: `ProdAssumptions name.` = `Print Assumptions name.` with memoisation.

   This is Coq 8.16.1's vernac/assumptions.ml (LGPL 2.1, INRIA/CNRS and contributors;
   initial author Arnaud Spiwack, module code Pierre Letouzey) with one change:

   `Print Assumptions` walks the body of every object in the transitive closure of
   the queried name, forcing every opaque proof (from .vo files) on every call.  Here
   the walk of ONE object's body is split into
     (a) [collect]: a walk of that body alone, which records, in order, the events the
         original walk performs on its accumulator: "reference to object o" (where the
         original would recurse into o) and "empty match on the body-less constant c"
         (where the original records c in [ax2ty]);
     (b) [replay]: the original accumulator code, run on those events.
   (a) is a pure function of the object's kernel record (its body term, or its
   opaque proof handle), so its result is memoised, keyed by the object's name AND
   the physical identity (==) of the record that the global environment holds for
   that name.  The memo keeps the record alive, so no other record can ever be (==)
   to it: a name redefined after `BackTo`/`Reset` gets a new record and a fresh walk.
   (b) runs on every call, exactly as the original, so the result (objects, their
   order in every map, the ax2ty lists) is identical to `Print Assumptions`.

   Only repeated references are dropped from an event list: in the original, the
   second reference to the same object o within one body only re-adds o to the
   body's own contents set (o is already in [data], or, for an inductive, in
   [data] or [curr]), which is a no-op.

   Not memoised (walked fresh every call, as in the original): section variables,
   the queried term itself, constants whose environment record has no body
   (axioms; constants of sealed modules, whose body is looked up in the module
   implementation), inductives not found in the environment, and any opaque proof
   whose forcing raised (the original then treats the constant as an axiom; we do
   the same but do not remember it). *)

open Pp
open CErrors
open Util
open Names
open Constr
open Declarations
open Mod_subst
open Printer
open Context.Named.Declaration

module NamedDecl = Context.Named.Declaration

(* ------------------------------------------------------------------------- *)
(* Module implementation lookup: verbatim from assumptions.ml.               *)

let modcache = ref (MPmap.empty : structure_body MPmap.t)

let rec search_mod_label lab = function
  | [] -> raise Not_found
  | (l, SFBmodule mb) :: _ when Label.equal l lab -> mb
  | _ :: fields -> search_mod_label lab fields

let rec search_cst_label lab = function
  | [] -> raise Not_found
  | (l, SFBconst cb) :: _ when Label.equal l lab -> cb
  | _ :: fields -> search_cst_label lab fields

let rec search_mind_label lab = function
  | [] -> raise Not_found
  | (l, SFBmind mind) :: _ when Label.equal l lab -> mind
  | _ :: fields -> search_mind_label lab fields

let rec fields_of_functor f subs mp0 args = function
  | NoFunctor a -> f subs mp0 args a
  | MoreFunctor (mbid,_,e) ->
    match args with
    | [] -> assert false (* we should only encounter applied functors *)
    | mpa :: args ->
      let subs = join (map_mbid mbid mpa empty_delta_resolver (*TODO*)) subs in
      fields_of_functor f subs mp0 args e

let rec lookup_module_in_impl mp =
    match mp with
    | MPfile _ -> Global.lookup_module mp
    | MPbound _ -> Global.lookup_module mp
    | MPdot (mp',lab') ->
       if ModPath.equal mp' (Global.current_modpath ()) then
         Global.lookup_module mp
       else
         let fields = memoize_fields_of_mp mp' in
         search_mod_label lab' fields

and memoize_fields_of_mp mp =
  try MPmap.find mp !modcache
  with Not_found ->
    let l = fields_of_mp mp in
    modcache := MPmap.add mp l !modcache;
    l

and fields_of_mp mp =
  let mb = lookup_module_in_impl mp in
  let fields,inner_mp,subs = fields_of_mb empty_subst mb [] in
  let subs =
    if ModPath.equal inner_mp mp then subs
    else add_mp inner_mp mp mb.mod_delta subs
  in
  Modops.subst_structure subs fields

and fields_of_mb subs mb args = match mb.mod_expr with
  | Algebraic expr -> fields_of_expression subs mb.mod_mp args expr
  | Struct sign -> fields_of_signature subs mb.mod_mp args sign
  | Abstract|FullStruct -> fields_of_signature subs mb.mod_mp args mb.mod_type

and fields_of_signature x =
  fields_of_functor
    (fun subs mp0 args struc ->
      assert (List.is_empty args);
      (struc, mp0, subs)) x

and fields_of_expr subs mp0 args = function
  | MEident mp ->
    let mb = lookup_module_in_impl (subst_mp subs mp) in
    fields_of_mb subs mb args
  | MEapply (me1,mp2) -> fields_of_expr subs mp0 (mp2::args) me1
  | MEwith _ -> assert false (* no 'with' in [mod_expr] *)

and fields_of_expression x = fields_of_functor fields_of_expr x

let lookup_constant_in_impl cst fallback =
  try
    let mp,lab = KerName.repr (Constant.canonical cst) in
    let fields = memoize_fields_of_mp mp in
    search_cst_label lab fields
  with Not_found ->
    match fallback with
      | Some cb -> cb
      | None -> anomaly (str "Print Assumption: unknown constant " ++ Constant.print cst ++ str ".")

let lookup_constant cst =
  let env = Global.env() in
  if not (Environ.mem_constant cst env)
  then lookup_constant_in_impl cst None
  else
    let cb = Environ.lookup_constant cst env in
    if Declareops.constant_has_body cb then cb
    else lookup_constant_in_impl cst (Some cb)

let lookup_mind_in_impl mind =
  try
    let mp,lab = KerName.repr (MutInd.canonical mind) in
    let fields = memoize_fields_of_mp mp in
      search_mind_label lab fields
  with Not_found ->
    anomaly (str "Print Assumption: unknown inductive " ++ MutInd.print mind ++ str ".")

let lookup_mind mind =
  let env = Global.env() in
  if Environ.mem_mind mind env then Environ.lookup_mind mind env
  else lookup_mind_in_impl mind

let label_of = let open GlobRef in function
  | ConstRef kn -> Constant.label kn
  | IndRef (kn,_)
  | ConstructRef ((kn,_),_) -> MutInd.label kn
  | VarRef id -> Label.of_id id

(* Verbatim from assumptions.ml. *)
let fold_with_full_binders g f n acc c =
  let open Context.Rel.Declaration in
  match kind c with
  | Rel _ | Meta _ | Var _   | Sort _ | Const _ | Ind _ | Construct _  | Int _ | Float _ -> acc
  | Cast (c,_, t) -> f n (f n acc c) t
  | Prod (na,t,c) -> f (g (LocalAssum (na,t)) n) (f n acc t) c
  | Lambda (na,t,c) -> f (g (LocalAssum (na,t)) n) (f n acc t) c
  | LetIn (na,b,t,c) -> f (g (LocalDef (na,b,t)) n) (f n (f n acc b) t) c
  | App (c,l) -> Array.fold_left (f n) (f n acc c) l
  | Proj (_,c) -> f n acc c
  | Evar (_,l) -> List.fold_left (f n) acc l
  | Case (ci, u, pms, p, iv, c, bl) ->
    let mib = lookup_mind (fst ci.ci_ind) in
    let (ci, p, iv, c, bl) = Inductive.expand_case_specif mib (ci, u, pms, p, iv, c, bl) in
    Array.fold_left (f n) (f n (fold_invert (f n) (f n acc p) iv) c) bl
  | Fix (_,(lna,tl,bl)) ->
      let n' = CArray.fold_left2_i (fun i c n t -> g (LocalAssum (n,lift i t)) c) n lna tl in
      let fd = Array.map2 (fun t b -> (t,b)) tl bl in
      Array.fold_left (fun acc (t,b) -> f n' (f n acc t) b) acc fd
  | CoFix (_,(lna,tl,bl)) ->
      let n' = CArray.fold_left2_i (fun i c n t -> g (LocalAssum (n,lift i t)) c) n lna tl in
      let fd = Array.map2 (fun t b -> (t,b)) tl bl in
      Array.fold_left (fun acc (t,b) -> f n' (f n acc t) b) acc fd
  | Array(_u,t,def,ty) -> f n (f n (Array.fold_left (f n) acc t) def) ty

(* ------------------------------------------------------------------------- *)
(* (a) Events of one body.                                                    *)

type event =
  | RefObj of GlobRef.t                 (* VarRef or ConstRef: [traverse_object] *)
  | RefInd of MutInd.t * GlobRef.t      (* IndRef/ConstructRef: [traverse_inductive] *)
  | EmptyMatch of Constant.t * Constr.rel_context * types
      (* the special case of [traverse] for `match c with end`, c body-less *)

(* Accumulator: events in reverse order, and the references already recorded. *)
type collect_acc = event list * GlobRef.Set_env.t

let add_ref obj ev ((evs, seen) as acc : collect_acc) =
  if GlobRef.Set_env.mem obj seen then acc
  else (ev :: evs, GlobRef.Set_env.add obj seen)

(* Mirrors [traverse] of assumptions.ml case by case. *)
let rec collect ctx (acc : collect_acc) t =
  let open GlobRef in
  match Constr.kind t with
  | Var id -> add_ref (VarRef id) (RefObj (VarRef id)) acc
  | Const (kn, _) -> add_ref (ConstRef kn) (RefObj (ConstRef kn)) acc
  | Ind ((mind, _) as ind, _) -> add_ref (IndRef ind) (RefInd (mind, IndRef ind)) acc
  | Construct (((mind, _), _) as cst, _) ->
    add_ref (ConstructRef cst) (RefInd (mind, ConstructRef cst)) acc
  | Meta _ | Evar _ -> assert false
  | Case (_, _, _, ([|_|], oty), _, c, [||]) when Vars.noccurn 1 oty ->
    begin match Constr.kind c with
    | Const (kn, _) when not (Declareops.constant_has_body (lookup_constant kn)) ->
      let (evs, seen) = acc in
      (EmptyMatch (kn, ctx, Vars.subst1 mkProp oty) :: evs, seen)
    | _ -> fold_with_full_binders Context.Rel.add collect ctx acc t
    end
  | _ -> fold_with_full_binders Context.Rel.add collect ctx acc t

(* Mirrors [traverse_context]. *)
let collect_context ctx acc ctxt =
  snd (Context.Rel.fold_outside (fun decl (ctx, acc) ->
    match decl with
    | Context.Rel.Declaration.LocalDef (_,c,t) ->
      let acc = collect ctx (collect ctx acc t) c in
      Context.Rel.add decl ctx, acc
    | Context.Rel.Declaration.LocalAssum (_,t) ->
      let acc = collect ctx acc t in
      Context.Rel.add decl ctx, acc) ctxt ~init:(ctx, acc))

let empty_acc : collect_acc = ([], GlobRef.Set_env.empty)
let finish ((evs, _) : collect_acc) = Array.of_list (List.rev evs)

let events_of_term t = finish (collect Context.Rel.empty empty_acc t)

(* Mirrors the body walk of [traverse_inductive]. *)
let events_of_mib mind mib =
  ignore mind;
  let param_ctx = mib.mind_params_ctxt in
  let nparam = List.length param_ctx in
  let acc = collect_context Context.Rel.empty empty_acc param_ctx in
  let acc = Array.fold_left (fun acc oib ->
      let arity_wo_param =
        List.rev (List.skipn nparam (List.rev oib.mind_arity_ctxt))
      in
      let acc = collect_context param_ctx acc arity_wo_param in
      Array.fold_left (fun acc cst_typ ->
          let param_ctx, cst_typ_wo_param = Term.decompose_prod_n_assum nparam cst_typ in
          collect param_ctx acc cst_typ_wo_param)
        acc oib.mind_user_lc)
      acc mib.mind_packets
  in
  finish acc

(* ------------------------------------------------------------------------- *)
(* The memo tables.                                                           *)

module CHash = Hashtbl.Make (Constant.UserOrd)
module MHash = Hashtbl.Make (MutInd.UserOrd)

let const_memo : (constant_body * event array) CHash.t = CHash.create 4096
let mind_memo : (mutual_inductive_body * event array) MHash.t = MHash.create 1024

(* Bound the memory: a worker that checks many fresh names would otherwise keep
   every record alive.  Clearing only costs time. *)
let max_entries = 200_000

let hits = ref 0
let misses = ref 0
let uncached = ref 0

let reset () =
  CHash.reset const_memo; MHash.reset mind_memo;
  hits := 0; misses := 0; uncached := 0

let force_body access o =
  match Global.force_proof access o with
  | c, _ -> Some c
  | exception _ -> None (* missing delayed body, e.g. in vok mode *)

(* Verbatim [get_constant_body] of assumptions.ml. *)
let get_constant_body kn =
  let cb = lookup_constant kn in
  let access = Library.indirect_accessor in
  match cb.const_body with
  | Undef _ | Primitive _ -> None
  | Def c -> Some c
  | OpaqueDef o -> force_body access o

(* Events of the body of constant [kn], or None where the original's
   [get_constant_body kn] is None. *)
let events_of_constant kn =
  let env = Global.env () in
  let memoisable =
    if Environ.mem_constant kn env then
      let cb = Environ.lookup_constant kn env in
      if Declareops.constant_has_body cb then Some cb else None
    else None
  in
  match memoisable with
  | None ->
    (* [lookup_constant] goes to the module implementation: walk as the original. *)
    incr uncached;
    Option.map events_of_term (get_constant_body kn)
  | Some cb ->
    (* Here [lookup_constant kn] == cb, so [get_constant_body kn] reads cb only. *)
    match CHash.find_opt const_memo kn with
    | Some (cb', evs) when cb' == cb -> incr hits; Some evs
    | _ ->
      incr misses;
      let body = match cb.const_body with
        | Undef _ | Primitive _ -> None
        | Def c -> Some c
        | OpaqueDef o -> force_body Library.indirect_accessor o
      in
      match body with
      | None -> None  (* forcing failed: not remembered *)
      | Some body ->
        let evs = events_of_term body in
        if CHash.length const_memo >= max_entries then CHash.reset const_memo;
        CHash.replace const_memo kn (cb, evs);
        Some evs

let events_of_mind mind =
  let env = Global.env () in
  if Environ.mem_mind mind env then
    let mib = Environ.lookup_mind mind env in
    match MHash.find_opt mind_memo mind with
    | Some (mib', evs) when mib' == mib -> incr hits; (mib, evs)
    | _ ->
      incr misses;
      let evs = events_of_mib mind mib in
      if MHash.length mind_memo >= max_entries then MHash.reset mind_memo;
      MHash.replace mind_memo mind (mib, evs);
      (mib, evs)
  else begin
    incr uncached;
    let mib = lookup_mind_in_impl mind in
    (mib, events_of_mib mind mib)
  end

(* ------------------------------------------------------------------------- *)
(* (b) Replay: the accumulator code of assumptions.ml, on events.            *)

let rec replay current evs accu =
  Array.fold_left (fun accu ev -> match ev with
    | RefObj (GlobRef.VarRef id as obj) ->
      let body () =
        incr uncached;
        Option.map events_of_term (id |> Global.lookup_named |> NamedDecl.get_value) in
      traverse_object accu body obj
    | RefObj (GlobRef.ConstRef kn as obj) ->
      traverse_object accu (fun () -> events_of_constant kn) obj
    | RefObj (GlobRef.IndRef _ | GlobRef.ConstructRef _) -> assert false
    | RefInd (mind, obj) -> traverse_inductive accu mind obj
    | EmptyMatch (kn, ctx, oty') ->
      let (curr, data, ax2ty) = accu in
      let obj = GlobRef.ConstRef kn in
      let already_in = GlobRef.Map_env.mem obj data in
      let data = if not already_in then GlobRef.Map_env.add obj None data else data in
      let ty = (current, ctx, oty') in
      let ax2ty =
        try let l = GlobRef.Map_env.find obj ax2ty in GlobRef.Map_env.add obj (ty::l) ax2ty
        with Not_found -> GlobRef.Map_env.add obj [ty] ax2ty in
      (GlobRef.Set_env.add obj curr, data, ax2ty))
    accu evs

and traverse_object (curr, data, ax2ty) body obj =
  let data, ax2ty =
    let already_in = GlobRef.Map_env.mem obj data in
    if already_in then data, ax2ty
    else match body () with
    | None ->
      GlobRef.Map_env.add obj None data, ax2ty
    | Some evs ->
      let contents,data,ax2ty =
        replay (label_of obj) evs (GlobRef.Set_env.empty,data,ax2ty) in
      GlobRef.Map_env.add obj (Some contents) data, ax2ty
  in
  (GlobRef.Set_env.add obj curr, data, ax2ty)

and traverse_inductive (curr, data, ax2ty) mind obj =
  let firstind_ref = (GlobRef.IndRef (mind, 0)) in
  let label = label_of obj in
  let data, ax2ty =
   if
     GlobRef.Set_env.mem firstind_ref curr ||
     GlobRef.Map_env.mem firstind_ref data
   then data, ax2ty
   else
     let curr = GlobRef.Set_env.add firstind_ref GlobRef.Set_env.empty in
     let accu = (curr, data, ax2ty) in
     let mib, evs = events_of_mind mind in
     let (contents, data, ax2ty) = replay label evs accu in
     let data =
       let contents = GlobRef.Set_env.remove firstind_ref contents in
       Array.fold_left_i (fun n data oib ->
       let ind = (mind, n) in
       let data = GlobRef.Map_env.add (GlobRef.IndRef ind) (Some contents) data in
       Array.fold_left_i (fun k data _ ->
         GlobRef.Map_env.add (GlobRef.ConstructRef (ind, k+1)) (Some contents) data
       ) data oib.mind_consnames) data mib.mind_packets
     in
     (data, ax2ty)
  in
  (GlobRef.Set_env.add obj curr, data, ax2ty)

let traverse current t =
  let () = modcache := MPmap.empty in
  replay current (events_of_term t)
    (GlobRef.Set_env.empty, GlobRef.Map_env.empty, GlobRef.Map_env.empty)

(* ------------------------------------------------------------------------- *)
(* Verbatim from assumptions.ml.                                              *)

let type_of_constant cb = cb.Declarations.const_type

let uses_uip mib =
  Array.exists (fun mip ->
      mip.mind_relevance == Sorts.Irrelevant
      && Array.length mip.mind_nf_lc = 1
      && List.length (fst mip.mind_nf_lc.(0)) = List.length mib.mind_params_ctxt)
    mib.mind_packets

let assumptions ?(add_opaque=false) ?(add_transparent=false) st gr t =
  let (_, graph, ax2ty) = traverse (label_of gr) t in
  let open GlobRef in
  let fold obj contents accu = match obj with
  | VarRef id ->
    let decl = Global.lookup_named id in
    if is_local_assum decl then
      let t = Context.Named.Declaration.get_type decl in
      ContextObjectMap.add (Variable id) t accu
    else accu
  | ConstRef kn ->
      let cb = lookup_constant kn in
      let accu =
        if cb.const_typing_flags.check_guarded then accu
        else
          let l = try GlobRef.Map_env.find obj ax2ty with Not_found -> [] in
          ContextObjectMap.add (Axiom (Guarded obj, l)) Constr.mkProp accu
      in
      let accu =
        if cb.const_typing_flags.check_universes then accu
        else
          let l = try GlobRef.Map_env.find obj ax2ty with Not_found -> [] in
          ContextObjectMap.add (Axiom (TypeInType obj, l)) Constr.mkProp accu
      in
    if not (Option.has_some contents) then
      let t = type_of_constant cb in
      let l = try GlobRef.Map_env.find obj ax2ty with Not_found -> [] in
      ContextObjectMap.add (Axiom (Constant kn,l)) t accu
    else if add_opaque && (Declareops.is_opaque cb || not (TransparentState.is_transparent_constant st kn)) then
      let t = type_of_constant cb in
      ContextObjectMap.add (Opaque kn) t accu
    else if add_transparent then
      let t = type_of_constant cb in
      ContextObjectMap.add (Transparent kn) t accu
    else
      accu
  | IndRef (m,_) | ConstructRef ((m,_),_) ->
      let mind = lookup_mind m in
      let accu =
        if mind.mind_typing_flags.check_positive then accu
        else
          let l = try GlobRef.Map_env.find obj ax2ty with Not_found -> [] in
          ContextObjectMap.add (Axiom (Positive m, l)) Constr.mkProp accu
      in
      let accu =
        if mind.mind_typing_flags.check_guarded then accu
        else
          let l = try GlobRef.Map_env.find obj ax2ty with Not_found -> [] in
          ContextObjectMap.add (Axiom (Guarded obj, l)) Constr.mkProp accu
      in
      let accu =
        if mind.mind_typing_flags.check_universes then accu
        else
          let l = try GlobRef.Map_env.find obj ax2ty with Not_found -> [] in
          ContextObjectMap.add (Axiom (TypeInType obj, l)) Constr.mkProp accu
      in
      let accu =
        if not (uses_uip mind) then accu
        else
          let l = try GlobRef.Map_env.find obj ax2ty with Not_found -> [] in
          ContextObjectMap.add (Axiom (UIP m, l)) Constr.mkProp accu
      in
      accu
  in GlobRef.Map_env.fold fold graph ContextObjectMap.empty

(* ------------------------------------------------------------------------- *)
(* The commands.                                                              *)

(* As `PrintAssumptions (false, false, r)` in vernacentries.ml (vernac_print). *)
let print_assumptions ~pstate r =
  let sigma, env =
    match pstate with
    | None -> let env = Global.env () in Evd.from_env env, env
    | Some p -> Declare.Proof.get_current_context p
  in
  let gr = Smartlocate.smart_global r in
  Dumpglob.add_glob ?loc:r.CAst.loc gr;
  let cstr = Globnames.printable_constr_of_global gr in
  let st = Conv_oracle.get_transp_state (Environ.oracle (Global.env())) in
  let nassums = assumptions st ~add_opaque:false ~add_transparent:false gr cstr in
  Feedback.msg_notice (Printer.pr_assumptionset env sigma nassums)

let print_stats () =
  Feedback.msg_notice
    (str "ProdAssumptions memo: " ++ int (CHash.length const_memo) ++ str " constants, "
     ++ int (MHash.length mind_memo) ++ str " inductives; hits " ++ int !hits
     ++ str ", misses " ++ int !misses ++ str ", uncached " ++ int !uncached)
