#!/bin/sh
# A `dlq watch --exec` hook that posts each new dead letter to Slack.
#
#   mkdir -p ~/.local/state/dlq
#   SLACK_WEBHOOK_URL=https://hooks.slack.com/services/... \
#     dlq watch --since-cursor ~/.local/state/dlq/slack.cursor --exec contrib/slack-hook.sh
#
# dlq gives the item in the legacy JSON shape on stdin, and DLQ_JOB_ID,
# DLQ_ITEM_ID, DLQ_EVENT (added, merged or imported) and DLQ_EVENT_ID in
# the environment. A non-zero exit makes dlq print a warning and, with a
# cursor, run it again later (1 s, doubling up to 60 s) until it succeeds.
# Needs jq and curl.
set -eu
: "${SLACK_WEBHOOK_URL:?set SLACK_WEBHOOK_URL to the Slack incoming webhook}"

# The last attempt's error type and first message line, and the item's count.
summary=$(jq -r '
  (.failure_history | last) as $last
  | "\(.failure_count) failure(s), last: \($last.error_type | if type == "object" then keys[0] else . end): \(($last.error_message // "") | split("\n")[0] | .[0:300])"')

text="Dead letter ($DLQ_EVENT) in job \`$DLQ_JOB_ID\`: item \`$DLQ_ITEM_ID\` - $summary"

# jq builds the JSON, so quotes and newlines in messages stay text.
jq -n --arg text "$text" '{text: $text}' |
  curl --fail --silent --show-error --max-time 10 \
    -H 'Content-Type: application/json' --data @- "$SLACK_WEBHOOK_URL" >/dev/null
