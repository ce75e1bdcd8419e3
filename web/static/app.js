// Copy buttons: <button data-copy="ID"> copies the value of element ID.
document.addEventListener("click", async (e) => {
  const b = e.target.closest("button[data-copy]");
  if (!b) return;
  const el = document.getElementById(b.dataset.copy);
  if (!el) return;
  try {
    await navigator.clipboard.writeText(el.value);
  } catch {
    el.select();
    document.execCommand("copy");
  }
  const old = b.textContent;
  b.textContent = "Copied";
  setTimeout(() => { b.textContent = old; }, 1500);
});
