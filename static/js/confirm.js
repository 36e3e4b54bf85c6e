// Buttons that stop other people's work ask first: <button data-confirm="#dialog-id"> opens that <dialog>; its
// "Yes" button submits the button's form as that button would (its formaction too). Without JavaScript the button
// submits directly (the server still checks).
document.addEventListener("click", function (event) {
  const button = event.target.closest("button[data-confirm]");
  if (!button) return;
  const dialog = document.querySelector(button.dataset.confirm);
  if (!dialog || !dialog.showModal) return;
  event.preventDefault();
  dialog.returnValue = "";
  dialog.showModal();
  dialog.addEventListener("close", function onClose() {
    dialog.removeEventListener("close", onClose);
    if (dialog.returnValue === "yes") button.form.requestSubmit(button);
  });
});
