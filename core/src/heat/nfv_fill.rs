//! The `nfv` parameter after the operation: removed VNFCs lose their entries; created VNFCs (and,
//! at instantiate, the non-indexed VDUs) get zones, images, flavours and networks; healed VNFCs
//! get the granted image; `additionalParams.nfv` of the request and the Grant is merged into the
//! entries touched; every referenced key of those entries must then have a value. The value of
//! one referenced key is derived in one place, [`Sources::value`], which [`super::base_parameters`]
//! uses as well.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::grant_check::Granted;
use super::membership::Plan;
use super::template::{Analysis, Mode, NfvRef, Section, indexed};
use super::{Current, Grant, HeatError, Input, Vnfc, grant_err};
use crate::package::Vnfd;
use crate::wire::sol003::{CpConfigs, ExtVirtualLinkData};

/// Keys whose absence is harmless (Heat's `get_param` yields `''`, which Nova and Heat treat as
/// "not given"); any other referenced key must get a value.
const OPTIONAL_KEYS: &[&str] = &["locationConstraints", "name", "computeName", "fixed_ips"];

/// Where a piece of CP network data came from: whom an error about it blames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// The Grant ([`HeatError::Grant`]).
    Grant,
    /// The LCM request ([`HeatError::Request`]).
    Request,
    /// The instance's current state ([`HeatError::Current`]).
    Current,
}

impl Origin {
    /// The error about `pointer` (RFC 6901, into this origin's document).
    fn error(self, pointer: String, reason: String) -> HeatError {
        match self {
            Self::Grant => HeatError::Grant { pointer, reason },
            Self::Request => HeatError::Request { pointer, reason },
            Self::Current => HeatError::Current { pointer, reason },
        }
    }

    /// Pointer of this origin's `extVirtualLinks`.
    fn ext_virtual_links(self) -> &'static str {
        match self {
            Self::Request => "/request/extVirtualLinks",
            Self::Grant | Self::Current => "/extVirtualLinks",
        }
    }
}

/// External VLs of one origin.
struct VlSource<'a> {
    links: &'a [ExtVirtualLinkData],
    origin: Origin,
}

/// What the first external VL listing a CP gives it.
struct CpLink {
    /// The VL's `resourceId` (Neutron network).
    network: String,
    /// `[{subnet?, ip_address?}]` from the extCp's `cpProtocolData.ipOverEthernet.ipAddresses`
    /// (`subnetId`, first of `fixedAddresses`).
    fixed_ips: Vec<Value>,
    /// Pointer of the extCp.
    pointer: String,
    /// Whom that pointer is into.
    origin: Origin,
}

/// Everything a value of an `nfv` entry is derived from.
pub(super) struct Sources<'a> {
    grant: &'a Grant,
    vnfd: &'a Vnfd,
    /// External VLs by precedence: the Grant's, the request's, the instance's.
    links: [VlSource<'a>; 3],
    /// The stack's `nfv` before the operation (`{}` at instantiate).
    current_nfv: &'a Value,
}

impl<'a> Sources<'a> {
    /// The sources of an operation: `grant`, `vnfd`, the request's external VLs `request_vls`,
    /// the instance's `current` VLs and its `current_nfv`.
    pub fn new(
        grant: &'a Grant,
        vnfd: &'a Vnfd,
        request_vls: &'a [ExtVirtualLinkData],
        current: &'a Current,
        current_nfv: &'a Value,
    ) -> Self {
        Self {
            grant,
            vnfd,
            links: [
                VlSource {
                    links: &grant.ext_virtual_links,
                    origin: Origin::Grant,
                },
                VlSource {
                    links: request_vls,
                    origin: Origin::Request,
                },
                VlSource {
                    links: &current.ext_virtual_links,
                    origin: Origin::Current,
                },
            ],
            current_nfv,
        }
    }

    /// The value of the key `r` references for target `t`, whose entry for `r` is named `entry`
    /// (`<name>-<index>` or `<name>`): `computeName` = `entry`; `computeFlavourId` from the
    /// Grant's `vimAssets`, else the VNFD; `vcImageId` (of the VDU or a virtual storage) likewise;
    /// `locationConstraints` = the granted zone; `desired_capacity` (non-indexed only) = the
    /// VDU's VNFC count; a CP's `network` and `fixed_ips` from the first external VL listing it
    /// (a scale-out without one: the `network` of the lowest remaining VNFC of the VDU). `None`:
    /// no value. Errors: a fixed address that several VNFCs of the VDU would share, blaming the
    /// extCp that gives it.
    fn value(&self, r: &NfvRef, t: &Target<'_>, entry: &str) -> Result<Option<Value>, HeatError> {
        let key = r.rest.first().and_then(Value::as_str);
        Ok(match (r.section, r.name == t.vdu, key) {
            (Section::Vdu, true, Some("computeName")) => Some(entry.into()),
            (Section::Vdu, true, Some("computeFlavourId")) => self
                .grant
                .flavour(t.vdu)
                .map(str::to_owned)
                .or_else(|| self.vnfd.vdus[t.vdu].flavour.clone())
                .map(Value::from),
            (Section::Vdu, _, Some("vcImageId")) => self
                .grant
                .image(&r.name)
                .map(str::to_owned)
                .or_else(|| self.vnfd.vdus.get(&r.name).and_then(|v| v.image.clone()))
                .or_else(|| self.vnfd.storage_images.get(&r.name).cloned())
                .map(Value::from),
            (Section::Vdu, true, Some("locationConstraints")) => t.zone.map(Value::from),
            (Section::Vdu, true, Some("desired_capacity")) if t.index.is_none() => {
                Some(t.count.into())
            }
            (Section::Cp, _, Some("network")) => match self.cp_link(&r.name) {
                Some(link) => Some(link.network.into()),
                // Scale-out without VL data: the network of an existing VNFC's same CP.
                None => t.sibling.and_then(|s| {
                    get_path(
                        self.current_nfv,
                        &["CP".into(), indexed(&r.name, s).into(), "network".into()],
                    )
                    .cloned()
                }),
            },
            (Section::Cp, _, Some("fixed_ips")) => match self.cp_link(&r.name) {
                Some(link) => {
                    let v = get_path(&Value::Array(link.fixed_ips), &r.rest[1..]).cloned();
                    let has_ip = v.as_ref().is_some_and(|v| {
                        r.rest.last().and_then(Value::as_str) == Some("ip_address")
                            || has_key(v, "ip_address")
                    });
                    if has_ip && t.count > 1 {
                        return Err(link.origin.error(
                            link.pointer,
                            format!(
                                "a fixed address for CP `{}` would be shared by the {} VNFCs of VDU `{}`",
                                r.name, t.count, t.vdu
                            ),
                        ));
                    }
                    v
                }
                None => None,
            },
            _ => None,
        })
    }

    /// The network and fixed IPs of CP `cp` from the first source whose VLs list it.
    fn cp_link(&self, cp: &str) -> Option<CpLink> {
        for s in &self.links {
            for (l, link) in s.links.iter().enumerate() {
                for (c, ext) in link.ext_cps.iter().enumerate() {
                    if ext.cpd_id != cp {
                        continue;
                    }
                    let mut fixed = Vec::new();
                    for pd in ext
                        .cp_config
                        .as_ref()
                        .map(CpConfigs::ip_over_ethernet)
                        .unwrap_or_default()
                    {
                        for a in pd["ipAddresses"].as_array().into_iter().flatten() {
                            let mut e = Map::new();
                            if let Some(s) = a["subnetId"].as_str() {
                                e.insert("subnet".into(), s.into());
                            }
                            if let Some(ip) = a["fixedAddresses"].get(0).and_then(Value::as_str) {
                                e.insert("ip_address".into(), ip.into());
                            }
                            fixed.push(Value::Object(e));
                        }
                    }
                    return Some(CpLink {
                        network: link.resource_id.clone(),
                        fixed_ips: fixed,
                        pointer: format!("{}/{l}/extCps/{c}", s.origin.ext_virtual_links()),
                        origin: s.origin,
                    });
                }
            }
        }
        None
    }
}

/// The entries being filled: one VNFC (`index` Some) or a VDU whose entries are not indexed.
struct Target<'a> {
    vdu: &'a str,
    index: Option<u32>,
    /// The granted zone.
    zone: Option<&'a str>,
    /// VNFCs of the VDU after the operation.
    count: usize,
    /// Index of the lowest current VNFC of the VDU that stays (network fallback at scale-out).
    sibling: Option<u32>,
    /// A key without a value is set to `null` (a VNFC created by INSTANTIATE) instead of left out.
    null_if_none: bool,
}

/// Creates the entries `refs` name for target `t` in `nfv` (an object) and sets each referenced
/// key that has a value. Errors: as [`Sources::value`]; `nfv.<section>` not an object.
fn fill_target(
    nfv: &mut Value,
    refs: &[NfvRef],
    sources: &Sources<'_>,
    t: &Target<'_>,
) -> Result<(), HeatError> {
    for r in refs {
        let entry = match t.index {
            Some(i) => indexed(&r.name, i),
            None => r.name.clone(),
        };
        let value = sources.value(r, t, &entry)?;
        let sec = nfv
            .as_object_mut()
            .expect("nfv is an object")
            .entry(r.section.key())
            .or_insert_with(|| json!({}));
        let e = sec
            .as_object_mut()
            .ok_or_else(|| HeatError::Current {
                pointer: format!("/nfv/{}", r.section.key()),
                reason: "not an object".to_owned(),
            })?
            .entry(entry)
            .or_insert_with(|| json!({}));
        // A name given earlier by additionalParams.nfv for this VNFC to come is kept.
        let named = r.rest.len() == 1
            && r.rest[0] == "computeName"
            && get_path(e, &r.rest).is_some_and(Value::is_string);
        match value {
            Some(_) if named => {}
            Some(v) => set_path(e, &r.rest, v),
            // A VNFC created by INSTANTIATE gets `null` for a key without a value, as Tacker's
            // StandardUserData.instantiate (Heat's `get_param` then yields null, not `''`).
            None if t.null_if_none && r.rest.len() == 1 => set_path(e, &r.rest, Value::Null),
            None => {}
        }
    }
    Ok(())
}

/// Fills the non-indexed entries of `vdu` (an AutoScalingGroup or single-resource VDU at
/// instantiate; every VDU of the BaseHOT as written) into `nfv`: the zone of its first granted
/// VNFC, `count` its VNFCs after the operation. Errors: as [`fill_target`].
pub(super) fn fill_unindexed(
    nfv: &mut Value,
    analysis: &Analysis,
    sources: &Sources<'_>,
    granted: &Granted<'_>,
    vdu: &str,
    count: usize,
) -> Result<(), HeatError> {
    let target = Target {
        vdu,
        index: None,
        zone: granted.vdu_zone(vdu),
        count,
        sibling: None,
        null_if_none: false,
    };
    fill_target(nfv, analysis.refs_of(vdu), sources, &target)
}

/// Entry names `(section, name)` of one VNFC of `vdu` (`<name>-<i>`) or of its non-indexed
/// entries (`i` None): the VDU, its virtual storages, its CPs.
pub(super) fn entries(vnfd: &Vnfd, vdu: &str, i: Option<u32>) -> Vec<(Section, String)> {
    let n = |s: &str| match i {
        Some(i) => indexed(s, i),
        None => s.to_owned(),
    };
    let mut out = vec![(Section::Vdu, n(vdu))];
    for s in &vnfd.vdus[vdu].storages {
        out.push((Section::Vdu, n(s)));
    }
    for (cp, c) in &vnfd.cps {
        if c.vdu == vdu {
            out.push((Section::Cp, n(cp)));
        }
    }
    out
}

/// The `nfv` parameter after the operation, with what happened on the way.
pub(super) struct Filled {
    /// The whole parameter.
    pub nfv: Value,
    /// `<VDU>-<index>` of the VNFCs whose image changed.
    pub image_changed: Vec<String>,
    /// `additionalParams.nfv` entries ignored, and why.
    pub warnings: Vec<String>,
}

/// The `nfv` parameter after the operation, from `current_nfv` (`{}` at instantiate), for the
/// VNFCs `after` it. Errors ([`HeatError`]): a fixed address several VNFCs would share; a
/// change of image without a granted image; an `additionalParams.nfv` that is not an object; a
/// referenced key of a touched entry that gets no value (named by its `get_param` path).
pub(super) fn fill(
    input: Input<'_>,
    analysis: &Analysis,
    plan: &Plan,
    grant: &Grant,
    granted: &Granted<'_>,
    current_nfv: &Value,
    after: &[Vnfc],
) -> Result<Filled, HeatError> {
    let vnfd = input.vnfd;
    let mut nfv = current_nfv.clone();
    if !nfv.is_object() {
        nfv = json!({});
    }
    remove_entries(&mut nfv, analysis, vnfd, granted);
    let sources = Sources::new(grant, vnfd, &plan.request_vls, input.current, current_nfv);
    let mut affected = fill_created(&mut nfv, input, analysis, plan, &sources, granted, after)?;
    if plan.change_ext_conn {
        change_cps(&mut nfv, input, analysis, plan, grant, &mut affected)?;
    }
    let image_changed = heal_images(
        &mut nfv,
        analysis,
        vnfd,
        plan,
        grant,
        granted,
        &mut affected,
    )?;
    if plan.is_heal {
        drop_vdu_nulls(&mut nfv);
    }
    let existing = existing_entries(input, analysis, after);
    let future = |sec: Section, name: &str| is_future_entry(vnfd, analysis, &existing, sec, name);
    // A change of external connectivity merges `additionalParams.nfv` into any existing entry
    // (Tacker merges it into the whole parameter).
    let mut merge_scope = affected.clone();
    if plan.change_ext_conn {
        merge_scope.extend(existing.iter().cloned());
    }
    let warnings = merge_additional(&mut nfv, plan, grant, &merge_scope, &future)?;
    check_values(&nfv, analysis, after, &affected)?;
    Ok(Filled {
        nfv,
        image_changed,
        warnings,
    })
}

/// How many VNFCs of VDU `vdu` exist after the operation (`after`).
fn count_after(after: &[Vnfc], vdu: &str) -> usize {
    after.iter().filter(|c| c.vdu_id == vdu).count()
}

/// Removes from `nfv` the indexed entries (VDU, storages, CPs) of the VNFCs the Grant
/// removes, for individually managed VDUs.
fn remove_entries(nfv: &mut Value, analysis: &Analysis, vnfd: &Vnfd, granted: &Granted<'_>) {
    for (v, i) in &granted.remove {
        if analysis.individual(v) {
            for (sec, name) in entries(vnfd, v, Some(*i)) {
                if let Some(m) = nfv.get_mut(sec.key()).and_then(Value::as_object_mut) {
                    m.remove(&name);
                }
            }
        }
    }
}

/// Fills the entries of the created VNFCs of individually managed VDUs and of the VDUs whose
/// entries are not indexed (all of them at instantiate; otherwise only an AutoScalingGroup's
/// referenced `desired_capacity`, set to the count `after`). Returns the entries filled, as
/// `(section, name)`. Errors: those of the fill of one entry (e.g. a shared fixed address).
fn fill_created(
    nfv: &mut Value,
    input: Input<'_>,
    analysis: &Analysis,
    plan: &Plan,
    sources: &Sources<'_>,
    granted: &Granted<'_>,
    after: &[Vnfc],
) -> Result<BTreeSet<(Section, String)>, HeatError> {
    let vnfd = input.vnfd;
    let mut affected: BTreeSet<(Section, String)> = BTreeSet::new();
    for (v, i) in &granted.create {
        if analysis.individual(v) {
            let sibling = input
                .current
                .vnfcs
                .iter()
                .filter(|c| c.vdu_id == *v)
                .filter(|c| !granted.remove.contains(&(c.vdu_id.clone(), c.index)))
                .map(|c| c.index)
                .min();
            let target = Target {
                vdu: v,
                index: Some(*i),
                zone: granted.zone(v, *i),
                count: count_after(after, v),
                sibling,
                null_if_none: plan.instantiate,
            };
            fill_target(nfv, analysis.refs_of(v), sources, &target)?;
            affected.extend(entries(vnfd, v, Some(*i)));
        }
    }
    for (vdu, mode) in &analysis.modes {
        if *mode != Mode::Individual {
            if plan.instantiate {
                fill_unindexed(
                    nfv,
                    analysis,
                    sources,
                    granted,
                    vdu,
                    count_after(after, vdu),
                )?;
                affected.extend(entries(vnfd, vdu, None));
            } else if analysis
                .refs_of(vdu)
                .iter()
                .any(|r| r.rest.first().and_then(Value::as_str) == Some("desired_capacity"))
            {
                set_path(
                    nfv,
                    &["VDU".into(), vdu.clone().into(), "desired_capacity".into()],
                    count_after(after, vdu).into(),
                );
            }
        }
    }
    Ok(affected)
}

/// The entries of VNFCs that exist before or after the operation, as `(section, name)`
/// (indexed names for individually managed VDUs).
fn existing_entries(
    input: Input<'_>,
    analysis: &Analysis,
    after: &[Vnfc],
) -> BTreeSet<(Section, String)> {
    let mut existing: BTreeSet<(Section, String)> = BTreeSet::new();
    for c in input.current.vnfcs.iter().chain(after) {
        existing.extend(entries(
            input.vnfd,
            &c.vdu_id,
            analysis.individual(&c.vdu_id).then_some(c.index),
        ));
    }
    existing
}

/// Whether `nfv.<sec>.<name>` is the entry of a VNFC still to come: an indexed entry
/// (`<base>-<index>`) of an individually managed VDU that no VNFC in `existing` has. Such an
/// `additionalParams.nfv` entry is kept for that VNFC.
fn is_future_entry(
    vnfd: &Vnfd,
    analysis: &Analysis,
    existing: &BTreeSet<(Section, String)>,
    sec: Section,
    name: &str,
) -> bool {
    name.rsplit_once('-').is_some_and(|(base, i)| {
        i.parse::<u32>().is_ok_and(|i| {
            analysis
                .modes
                .keys()
                .filter(|v| analysis.individual(v))
                .any(|v| {
                    entries(vnfd, v, Some(i)).contains(&(sec, name.to_owned()))
                        && entries(vnfd, v, None).contains(&(sec, base.to_owned()))
                })
        })
    }) && !existing.contains(&(sec, name.to_owned()))
}

/// CHANGE_EXT_CONN (Tacker's `StandardUserData.change_ext_conn`): for every `nfv.CP` entry of
/// an existing individually managed VNFC (`<CP>-<index>`) or of a single-resource VDU (`<CP>`)
/// whose CP the Grant's or the request's external VLs name (the first listing it), `network`
/// becomes the VL's `resourceId` and `fixed_ips` is replaced by one item per address of the
/// extCp (`cpProtocolData[].ipOverEthernet.ipAddresses[]`) for as long as the BaseHOT references
/// that position, each with the referenced `subnet`/`ip_address` (`null` when the extCp gives
/// none) — only the keys the BaseHOT references are written. Entries of CPs no VL names are
/// kept; AutoScalingGroup VDUs are not changed (Tacker leaves them too). The rewritten entries
/// are added to `affected`. Errors: a fixed address that several VNFCs of a VDU would share,
/// blaming the extCp that gives it.
fn change_cps(
    nfv: &mut Value,
    input: Input<'_>,
    analysis: &Analysis,
    plan: &Plan,
    grant: &Grant,
    affected: &mut BTreeSet<(Section, String)>,
) -> Result<(), HeatError> {
    // Only the Grant's and the request's VLs: the instance's are what changes.
    let none = Current::default();
    let empty = json!({});
    let sources = Sources::new(grant, input.vnfd, &plan.request_vls, &none, &empty);
    for (vdu, index, count) in cp_owners(input, analysis) {
        let refs: Vec<&NfvRef> = analysis
            .refs_of(vdu)
            .iter()
            .filter(|r| r.section == Section::Cp)
            .collect();
        let mut cps: Vec<&str> = refs.iter().map(|r| r.name.as_str()).collect();
        cps.dedup();
        for cp in cps {
            let Some(link) = sources.cp_link(cp) else {
                continue;
            };
            let name = match index {
                Some(i) => indexed(cp, i),
                None => cp.to_owned(),
            };
            let mine: Vec<&NfvRef> = refs.iter().filter(|r| r.name == cp).copied().collect();
            let entry = cp_entry(&mine, link, cp, vdu, count)?;
            if entry.is_empty() {
                continue;
            }
            merge_cp_entry(nfv, &name, entry)?;
            affected.insert((Section::Cp, name));
        }
    }
    Ok(())
}

/// Whose `nfv.CP` entries a change of external connectivity may rewrite, as `(VDU, index,
/// VNFCs of the VDU)`: each existing VNFC of an individually managed VDU, and each
/// single-resource VDU (index `None`, at least one VNFC); AutoScalingGroup VDUs are left out.
fn cp_owners<'a>(input: Input<'_>, analysis: &'a Analysis) -> Vec<(&'a str, Option<u32>, usize)> {
    let mut targets: Vec<(&str, Option<u32>, usize)> = Vec::new();
    for (vdu, mode) in &analysis.modes {
        let count = input
            .current
            .vnfcs
            .iter()
            .filter(|c| &c.vdu_id == vdu)
            .count();
        match mode {
            Mode::Individual => targets.extend(
                input
                    .current
                    .vnfcs
                    .iter()
                    .filter(|c| &c.vdu_id == vdu)
                    .map(|c| (vdu.as_str(), Some(c.index), count)),
            ),
            Mode::Single => targets.push((vdu.as_str(), None, count.max(1))),
            Mode::Asg(_) => {}
        }
    }
    targets
}

/// The new values of CP `cp`'s entry for one VNFC of VDU `vdu` (of `count` VNFCs), from the
/// external VL `link`: `network` and `fixed_ips` (one item per extCp address for as long as
/// the BaseHOT references that position), only the keys `mine` (the BaseHOT's references to
/// the entry) use; empty when it uses neither. Errors: a fixed address the `count` VNFCs
/// would share, blaming the extCp that gives it.
fn cp_entry(
    mine: &[&NfvRef],
    link: CpLink,
    cp: &str,
    vdu: &str,
    count: usize,
) -> Result<Map<String, Value>, HeatError> {
    let key = |r: &NfvRef| r.rest.first().and_then(Value::as_str).map(str::to_owned);
    let mut entry = Map::new();
    if mine.iter().any(|r| key(r).as_deref() == Some("network")) {
        entry.insert("network".into(), link.network.clone().into());
    }
    if mine.iter().any(|r| key(r).as_deref() == Some("fixed_ips")) {
        let mut list = Vec::new();
        for (i, ext) in link.fixed_ips.iter().enumerate() {
            let keys: Vec<&str> = mine
                .iter()
                .filter(|r| r.rest.get(1).and_then(Value::as_u64) == Some(i as u64))
                .filter_map(|r| r.rest.get(2).and_then(Value::as_str))
                .collect();
            if keys.is_empty() {
                break;
            }
            let mut item = Map::new();
            for k in keys {
                item.insert(k.to_owned(), ext.get(k).cloned().unwrap_or(Value::Null));
            }
            if item.get("ip_address").is_some_and(Value::is_string) && count > 1 {
                return Err(link.origin.error(
                    link.pointer,
                    format!(
                        "a fixed address for CP `{cp}` would be shared by the {count} VNFCs of VDU `{vdu}`"
                    ),
                ));
            }
            list.push(Value::Object(item));
        }
        entry.insert("fixed_ips".into(), Value::Array(list));
    }
    Ok(entry)
}

/// Merges `entry` (a JSON merge patch) into `nfv.CP.<name>`, creating `CP` and the entry as needed.
/// Errors: `nfv.CP` is not an object.
fn merge_cp_entry(nfv: &mut Value, name: &str, entry: Map<String, Value>) -> Result<(), HeatError> {
    let sec = nfv
        .as_object_mut()
        .expect("nfv is an object")
        .entry("CP")
        .or_insert_with(|| json!({}));
    let Some(sec) = sec.as_object_mut() else {
        return Err(HeatError::Current {
            pointer: "/nfv/CP".to_owned(),
            reason: "not an object".to_owned(),
        });
    };
    let slot = sec.entry(name.to_owned()).or_insert_with(|| json!({}));
    json_patch::merge(slot, &Value::Object(entry));
    Ok(())
}

/// Heal and change of image: only the VDU's image (a virtual storage keeps its own, also with
/// `all: true`), only when the Grant gives one (an
/// AutoScalingGroup member is rebuilt by Heat with its parameters unchanged). Adds the healed
/// VNFCs' entries to `affected`; returns `<VDU>-<index>` of those whose image changed. Errors:
/// a change of image for which the Grant gives no image of the VDU.
fn heal_images(
    nfv: &mut Value,
    analysis: &Analysis,
    vnfd: &Vnfd,
    plan: &Plan,
    grant: &Grant,
    granted: &Granted<'_>,
    affected: &mut BTreeSet<(Section, String)>,
) -> Result<Vec<String>, HeatError> {
    let mut image_changed = Vec::new();
    for (v, i) in &granted.heal {
        if let Mode::Asg(_) = analysis.modes[v] {
            continue;
        }
        // Single mode: the one VNFC's entries are not indexed.
        let ix = |name: &str| {
            if analysis.individual(v) {
                indexed(name, *i)
            } else {
                name.to_owned()
            }
        };
        // Only the VDU's image: a virtual storage healed with `all: true` is made again from the
        // image it has (heal restores a VNFC; a new image for a volume is a change of package).
        // Tacker's StandardUserData.heal does the same (COMPUTE entries only).
        let names = [v.clone()];
        let mut changed = false;
        for name in &names {
            let uses_image = analysis.refs_of(v).iter().any(|r| {
                r.section == Section::Vdu
                    && r.name == *name
                    && r.rest.first().and_then(Value::as_str) == Some("vcImageId")
            });
            let img = grant.image(name);
            if plan.require_image && name == v && img.is_none() {
                return Err(grant_err(
                    "/vimAssets/softwareImages",
                    format!(
                        "change of image of {}: no entry with vnfdSoftwareImageId `{name}`",
                        indexed(v, *i)
                    ),
                ));
            }
            if let (true, Some(img)) = (uses_image, img) {
                let path = ["VDU".into(), ix(name).into(), "vcImageId".into()];
                if get_path(nfv, &path).and_then(Value::as_str) != Some(img) {
                    set_path(nfv, &path, img.into());
                    changed = true;
                }
            }
        }
        if changed {
            image_changed.push(indexed(v, *i));
        }
        affected.extend(entries(vnfd, v, analysis.individual(v).then_some(*i)));
    }
    Ok(image_changed)
}

/// Merges `additionalParams.nfv` of the request, then of the Grant (RFC 7386), into the
/// `affected` entries and into the entries of VNFCs that do not exist yet (`future`: kept in
/// `nfv` until a SCALE_OUT creates the VNFC and fills the rest of its entry, as Tacker keeps
/// them); returns a warning for each section or entry ignored (an existing VNFC the operation
/// does not touch). Errors: an `additionalParams.nfv` that is not an object.
fn merge_additional(
    nfv: &mut Value,
    plan: &Plan,
    grant: &Grant,
    affected: &BTreeSet<(Section, String)>,
    future: &dyn Fn(Section, &str) -> bool,
) -> Result<Vec<String>, HeatError> {
    let grant_nfv = grant.additional_params.as_ref().and_then(|a| a.get("nfv"));
    let extras = [
        (
            Origin::Request,
            "/request/additionalParams/nfv",
            plan.request_nfv.as_ref(),
        ),
        (Origin::Grant, "/additionalParams/nfv", grant_nfv),
    ];
    let mut warnings = Vec::new();
    for (origin, pointer, extra) in extras {
        let Some(extra) = extra else { continue };
        let Some(obj) = extra.as_object() else {
            // The Grant's reason repeats the pointer; the request's does not.
            let reason = match origin {
                Origin::Request => "not an object".to_owned(),
                Origin::Grant | Origin::Current => format!("{pointer}: not an object"),
            };
            return Err(origin.error(pointer.to_owned(), reason));
        };
        for (sec_key, entries_v) in obj {
            let sec = match sec_key.as_str() {
                "VDU" => Section::Vdu,
                "CP" => Section::Cp,
                _ => {
                    warnings.push(format!(
                        "{pointer}/{sec_key} ignored: the BaseHOT uses only nfv.VDU and nfv.CP"
                    ));
                    continue;
                }
            };
            for (name, v) in entries_v.as_object().into_iter().flatten() {
                if affected.contains(&(sec, name.clone())) || future(sec, name) {
                    let target = nfv
                        .as_object_mut()
                        .expect("nfv is an object")
                        .entry(sec.key())
                        .or_insert_with(|| json!({}));
                    let slot = target
                        .as_object_mut()
                        .expect("section is an object")
                        .entry(name.clone())
                        .or_insert_with(|| json!({}));
                    json_patch::merge(slot, v);
                } else {
                    warnings.push(format!(
                        "{pointer}/{sec_key}/{name} ignored: this operation creates or heals no VNFC with that entry"
                    ));
                }
            }
        }
    }
    Ok(warnings)
}

/// Every referenced key of an `affected` entry must have a value unless it is optional
/// ([`OPTIONAL_KEYS`]). Errors: [`HeatError::Template`] at the `get_param`'s template path.
fn check_values(
    nfv: &Value,
    analysis: &Analysis,
    after: &[Vnfc],
    affected: &BTreeSet<(Section, String)>,
) -> Result<(), HeatError> {
    for (vdu, refs) in &analysis.refs {
        for r in refs {
            let key = r.rest.first().and_then(Value::as_str);
            if key.is_none_or(|k| OPTIONAL_KEYS.contains(&k)) {
                continue;
            }
            let names: Vec<String> = if analysis.individual(vdu) {
                after
                    .iter()
                    .filter(|c| c.vdu_id == *vdu)
                    .map(|c| indexed(&r.name, c.index))
                    .collect()
            } else {
                vec![r.name.clone()]
            };
            for name in names {
                if !affected.contains(&(r.section, name.clone())) {
                    continue;
                }
                let mut path = vec![Value::from(r.section.key()), Value::from(name.clone())];
                path.extend(r.rest.iter().cloned());
                if get_path(nfv, &path).is_none() {
                    return Err(HeatError::Template {
                        file: analysis.file.clone(),
                        at: r.at.clone(),
                        reason: format!(
                            "get_param into nfv.{}.{name}.{} which gets no value: vnfkeeper fills \
                             computeName, computeFlavourId, vcImageId, locationConstraints, \
                             desired_capacity (ASG) and a CP's network and fixed_ips from the \
                             VNFD, the Grant and the external virtual links; give other keys in \
                             additionalParams.nfv",
                            r.section.key(),
                            r.rest
                                .iter()
                                .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                                .collect::<Vec<_>>()
                                .join(".")
                        ),
                    });
                }
            }
        }
    }
    Ok(())
}

/// A heal leaves no `null` in the `nfv.VDU` entries: Tacker's StandardUserData.heal sends every
/// VDU entry back as an RFC 7386 merge patch, in which a `null` (an INSTANTIATE without a zone)
/// removes its key. The `nfv.CP` entries keep theirs.
fn drop_vdu_nulls(nfv: &mut Value) {
    fn strip(v: &mut Value) {
        if let Value::Object(m) = v {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip);
        }
    }
    if let Some(vdus) = nfv.get_mut("VDU").and_then(Value::as_object_mut) {
        vdus.values_mut().for_each(strip);
    }
}

/// Whether `v` holds an object with key `key` at any depth.
fn has_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.contains_key(key) || m.values().any(|x| has_key(x, key)),
        Value::Array(a) => a.iter().any(|x| has_key(x, key)),
        _ => false,
    }
}

/// Sets `v` at `path` below `target` (strings are keys, integers array positions; missing
/// containers are created, array gaps filled with `{}`).
fn set_path(target: &mut Value, path: &[Value], v: Value) {
    let Some((first, rest)) = path.split_first() else {
        *target = v;
        return;
    };
    if let Some(i) = first.as_u64() {
        let i = i as usize;
        if !target.is_array() {
            *target = Value::Array(Vec::new());
        }
        let a = target.as_array_mut().expect("just made an array");
        while a.len() <= i {
            a.push(json!({}));
        }
        set_path(&mut a[i], rest, v);
    } else {
        let key = match first {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if !target.is_object() {
            *target = json!({});
        }
        let m = target.as_object_mut().expect("just made an object");
        set_path(m.entry(key).or_insert(Value::Null), rest, v);
    }
}

/// The value at `path` below `v`, if present and not null.
fn get_path<'v>(v: &'v Value, path: &[Value]) -> Option<&'v Value> {
    let mut cur = v;
    for p in path {
        cur = match p {
            Value::String(s) => cur.get(s)?,
            Value::Number(n) => cur.get(n.as_u64()? as usize)?,
            _ => return None,
        };
    }
    (!cur.is_null()).then_some(cur)
}
