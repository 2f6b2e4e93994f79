// The live event stream, GET /v1/events, read with fetch (EventSource cannot send the
// Authorization header). One stream per tab; after a drop it reconnects after 1 s,
// backing off to 10 s.

import { parseJson, readEvents, request } from "./api.js";
import { sleep } from "./format.js";

const FIRST_DELAY_MS = 1000;
const MAX_DELAY_MS = 10_000;

let current = null;

/**
 * Starts the tab's stream (stopping any previous one). `onEvent({event, data})` gets
 * every event with its data parsed as JSON; `onOpen()` runs on every (re)connection,
 * so the caller can catch up on what happened while it was away.
 */
export function startEvents({ onEvent, onOpen }) {
  stopEvents();
  const controller = new AbortController();
  const state = { controller, stopped: false };
  current = state;

  (async () => {
    let delay = FIRST_DELAY_MS;
    while (!state.stopped) {
      try {
        const response = await request("GET", "/v1/events", {
          raw: true,
          signal: controller.signal,
          headers: { Accept: "text/event-stream" },
        });
        delay = FIRST_DELAY_MS;
        if (onOpen) onOpen();
        for await (const { event, data } of readEvents(response.body)) {
          if (state.stopped) break;
          try {
            onEvent({ event, data: parseJson(data) });
          } catch (e) {
            console.error(e);
          }
        }
      } catch (err) {
        if (state.stopped || (err && err.name === "AbortError")) {
          break;
        }
        if (err && err.status === 401) {
          state.stopped = true;
          break;
        }
      }
      if (state.stopped) break;
      await sleep(delay);
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  })();
}

export function stopEvents() {
  if (current) {
    current.stopped = true;
    current.controller.abort();
    current = null;
  }
}
