// The sign-in form: the admin token goes once in a POST body; the server answers with the
// session cookie. Nothing else is shown until it has.
import { ApiError, signIn, SignedOut } from "../api";
import { h } from "../dom";

export function renderLogin(app: HTMLElement, done: () => void): void {
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off",
                             required: true, placeholder: "admin token" });
  const message = h("p", { class: "error", id: "login-error", role: "alert" });
  const form = h(
    "form",
    { id: "login", class: "card" },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "The admin token is in $APPRENTICE_HOME/admin_token unless APPRENTICE_ADMIN_TOKEN is set."),
    h("label", { for: "token" }, "Admin token"),
    input,
    h("button", { type: "submit" }, "Sign in"),
    message,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.textContent = "";
    try {
      await signIn(input.value);
      input.value = "";
      done();
    } catch (error) {
      message.textContent =
        error instanceof SignedOut ? "That is not the admin token." :
        error instanceof ApiError ? error.message : String(error);
    }
  });
  app.replaceChildren(form);
  input.focus();
}
