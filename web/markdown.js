// The agent's replies as Markdown (M-DAILY "Chat as people expect"), made safe twice:
// marked turns the text into HTML with every piece of raw HTML in it escaped (shown as
// the text it is), then DOMPurify keeps only the elements Markdown makes, links only to
// http(s) and mailto (a `javascript:` or `data:` link loses its target and stays as its
// text), no images (they would load from anywhere), and every link opens in a new tab
// with `rel="noopener noreferrer"`. The page's CSP (`script-src 'self'`) is the third
// line: nothing inline would run even if both let it through.

import { Marked } from "./vendor/marked.mjs";
import DOMPurify from "./vendor/purify.mjs";

/** The elements Markdown makes, and nothing else. */
const ALLOWED_TAGS = [
  "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote",
  "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6",
  "table", "thead", "tbody", "tr", "th", "td", "input",
];
const ALLOWED_ATTR = ["href", "title", "start", "align", "type", "checked", "disabled", "class"];
/** Links a reply may hold: the web and mail, nothing that runs or embeds. */
const SAFE_LINK = /^(?:https?:|mailto:)/i;

const escapeHtml = (s) =>
  String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

const marked = new Marked({ gfm: true, breaks: true, async: false });
marked.use({
  renderer: {
    // Raw HTML in a reply is shown as the text it is, never as markup.
    html(token) {
      return escapeHtml(token.text ?? token.raw ?? "");
    },
    // An image is shown as its description: a reply cannot make the page load anything.
    image(token) {
      return escapeHtml(token.text || "image");
    },
  },
});

const purify = DOMPurify(window);
purify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href");
    if (href && SAFE_LINK.test(href.trim())) {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    } else {
      node.removeAttribute("href");
    }
  }
  // Task-list boxes only, and never clickable.
  if (node.tagName === "INPUT") {
    if (node.getAttribute("type") !== "checkbox") node.remove();
    else node.setAttribute("disabled", "");
  }
  if (node.hasAttribute("class") && !/^language-[\w+-]+$/.test(node.getAttribute("class"))) {
    node.removeAttribute("class");
  }
});

/** `text` (a reply, whole or as far as it came) as safe DOM nodes. */
export function renderMarkdown(text) {
  const html = marked.parse(String(text ?? ""));
  return purify.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOWED_URI_REGEXP: SAFE_LINK,
    RETURN_DOM_FRAGMENT: true,
  });
}
