// Package preselect removes from each transaction, before a phase's rules
// run, the rules that cannot match it, so that Coraza evaluates only the
// rules that can. Coraza itself then evaluates what is left exactly as
// before: every effect (captures, setvar, anomaly scores, logs, disruptive
// actions) still comes from Coraza. The invariant, its proof and each
// stage's reasoning are in docs/preselection.md.
//
// # Compile time, in the order the rule set flows
//
//   - ruleset.go: ReadRuleSet reads the directives and every included
//     file once, as Coraza's parser will, into what every later stage
//     uses: the rules with their chains, markers and free lines in order,
//     the chained rules of each rule, and the directive facts
//     (SecDefaultAction, SecRuleUpdate*, SecRuleRemove*, ctl removals).
//   - jumps.go: PlanJumps puts a skipAfter jump in front of each run of
//     markers a phase has no rules in; checkJumps verifies them on the
//     compiled rules.
//   - screenedjumps.go: jumps over runs of screenable rules, taken when
//     the screen drops every rule they pass over.
//   - leftout.go: PlanLeavingOut leaves out of the compile the rules the
//     paranoia-level gates jump over in every transaction.
//   - rewrite.go: JumpPlan, the one place the texts are rewritten (jumps
//     on free lines, left-out rules blank) before Coraza compiles them.
//   - builder.go: the Builder sees each compiled rule through Coraza's
//     rule observer and each of this project's operators as Coraza builds
//     it; Finish turns them into an Index.
//   - index.go: newIndex decides, for each rule of a screened phase,
//     whether the screen may remove it (Index.Reason says why not).
//   - phaseplan.go: the plan of one phase: its screened rules, their
//     targets, stretches and the trie of transformation chains.
//   - parse.go: the rule text parser (targets, operator, actions).
//   - writes.go: what each rule and its chain may write in TX.
//   - prelude.go: the rules that decide the same in every transaction,
//     run once at compile time (Snapshot) and replayed by Index.Start.
//   - records.go, links.go, setters.go, noop.go, skips.go: rules judged
//     from what they record, their chained rules, settings and additions
//     that change nothing, and the skips the screen can follow.
//   - markers.go: hidden markers; exclusions.go, keyrx.go: the
//     collections and keys a kept rule is told to skip.
//
// # Per transaction
//
//   - screen.go: the trigger operator that runs a stretch's screen before
//     its first rule, the decisions, and the removals (RemoveRuleByID).
//   - values.go: the values of the collections the screened rules read.
//   - walk.go: the walk of a value through the trie of transformation
//     chains, with the union automaton's scans (filter/fastpath).
//   - memo.go: verdicts remembered across transactions per value.
//   - made.go: the paths of the trie that make the same string.
//
// # Tests
//
// Each file's decisions are pinned by its own _test.go (jumps_test.go,
// leftout_test.go, prelude_test.go, ...); tx_test.go covers TX reads and
// writes, remove_test.go the removals. That no rule Coraza would match is
// removed is proven in package filter: the differential tests
// (preselect_diff_test.go, preselect_large_test.go) compare verdicts,
// matched rules, logs and TX with and without the preselection.
package preselect
