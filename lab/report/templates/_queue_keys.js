// Keys for the served queues read row after row (serve_review.js, serve_label.js): a letter of
// `keys` calls its function, Enter presses the save button when it is enabled. While a field
// has the focus, letters and Enter are its text and Ctrl+Enter (Cmd+Enter) saves.
function queueKeys(keys, save) {
  document.addEventListener("keydown", function (e) {
    var typing = /^(TEXTAREA|INPUT|SELECT)$/.test(e.target.tagName);
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey || !typing) && !e.altKey) {
      if (!save.disabled) { e.preventDefault(); save.click(); }
      return;
    }
    if (typing || e.ctrlKey || e.metaKey || e.altKey || !Object.prototype.hasOwnProperty.call(keys, e.key)) { return; }
    e.preventDefault();
    keys[e.key]();
  });
}
